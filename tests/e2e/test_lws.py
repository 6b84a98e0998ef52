"""The LeaderWorkerSet controller (v0.9.0, with its webhooks) over the LeaderWorkerSet gpuscale emits for a multi-node
replica: the prod stack with llama-70b-fp8 served aggregated at TP8 x PP2 (``tests.specs.multi_node_aggregated``, two
8-GPU pods per replica). The group's pods stay Pending (no 8-GPU EFA node here): what is checked is what the
controller and its pod webhook create."""

from __future__ import annotations

import re
import time
from typing import Any

from gpuscale.schedule.chart import priority_classes
from gpuscale.stackfile import read_stack_config, validate_config
from gpuscale.synth.render import synth_spec
from tests.conftest import stack_path
from tests.specs import multi_node_aggregated

GROUP_S = 120
LWS_NAME_LABEL = "leaderworkerset.sigs.k8s.io/name"
WORKER_INDEX_LABEL = "leaderworkerset.sigs.k8s.io/worker-index"
GROUP_INDEX_LABEL = "leaderworkerset.sigs.k8s.io/group-index"
_ENV_REF = re.compile(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)")


def _referenced_env(container: dict[str, Any]) -> set[str]:
    texts = [*container.get("command", []), *container.get("args", [])]
    texts += [e.get("value", "") for e in container.get("env", [])]
    return {m for t in texts for m in _ENV_REF.findall(str(t))}


def test_a_multi_node_replica_s_group_has_the_pods_env_and_labels_its_templates_expect(
        harness: Any, scenario: Any) -> None:
    harness.ensure_lws()
    spec = validate_config(multi_node_aggregated(read_stack_config(stack_path("prod"))), "e2e")
    result = synth_spec(spec, stack="prod")
    objects = [o for _, o in result.kubernetes_objects()]
    kai = next(c for c in result.charts() if c["chart"].endswith("kai-scheduler"))
    lws = next(o for o in objects if o["kind"] == "LeaderWorkerSet")
    name, ns = lws["metadata"]["name"], lws["metadata"]["namespace"]
    size = int(lws["spec"]["leaderWorkerTemplate"]["size"])
    lws["spec"]["replicas"] = 1
    # the namespace before what lives in it: synth lists the ServiceAccounts first, and kubectl applies a List in order
    harness.kubectl.apply([o for o in objects if o["kind"] == "Namespace" and o["metadata"]["name"] == ns])
    harness.kubectl.apply([o for o in objects
                           if o["kind"] == "ServiceAccount" and o["metadata"].get("namespace") == ns])
    harness.kubectl.apply(priority_classes(kai["values"]))  # the KAI chart's classes the pods name
    harness.kubectl.apply([lws])
    scenario.observed.update(lws=name, size=size, changes=["spec.replicas 1"])
    deadline = time.monotonic() + GROUP_S
    pods: list[dict[str, Any]] = []
    while time.monotonic() < deadline:
        pods = [p for p in harness.kubectl.items("pods", namespace=ns)
                if p["metadata"].get("labels", {}).get(LWS_NAME_LABEL) == name]
        if len(pods) >= size:
            break
        time.sleep(3)
    try:
        scenario.observed["pods"] = [{"name": p["metadata"]["name"], "labels": p["metadata"]["labels"],
                                      "env": sorted(e["name"] for c in p["spec"]["containers"]
                                                    for e in c.get("env", []))} for p in pods]
        assert len(pods) == size, f"{len(pods)} pods of group 0 after {GROUP_S} s, size {size}"
        by_index = {p["metadata"]["labels"].get(WORKER_INDEX_LABEL): p for p in pods}
        assert sorted(by_index) == [str(i) for i in range(size)], sorted(by_index)
        templates = {"0": lws["spec"]["leaderWorkerTemplate"].get("leaderTemplate")
                     or lws["spec"]["leaderWorkerTemplate"]["workerTemplate"]}
        templates.update({str(i): lws["spec"]["leaderWorkerTemplate"]["workerTemplate"] for i in range(1, size)})
        for index, pod in by_index.items():
            template = templates[index]
            for key, value in template["metadata"].get("labels", {}).items():
                assert pod["metadata"]["labels"].get(key) == value, (pod["metadata"]["name"], key)
            assert pod["metadata"]["labels"].get(GROUP_INDEX_LABEL) == "0"
            for want, got in zip(template["spec"]["containers"], pod["spec"]["containers"], strict=True):
                defined = {e["name"] for e in got.get("env", [])}
                missing = _referenced_env(want) - defined
                assert not missing, f"{pod['metadata']['name']}/{got['name']}: $({', '.join(sorted(missing))}) undefined"
                assert {"LWS_LEADER_ADDRESS", "LWS_GROUP_SIZE", "LWS_WORKER_INDEX"} <= defined, sorted(defined)
                group_size = next(e["value"] for e in got["env"] if e["name"] == "LWS_GROUP_SIZE")
                assert group_size == str(size)
    finally:
        harness.kubectl.run(["delete", "leaderworkerset.leaderworkerset.x-k8s.io", name, "-n", ns,
                             "--ignore-not-found", "--wait=false"], check=False)
