"""The harness's own logic, without a cluster (these run in ``make test``): the binary pins against the charts and
the wrapper modules, build-cost parsing, the exporter's exposition, the scrape targets made from a PodMonitor, and
what the KEDA scenarios change in the emitted objects."""

from __future__ import annotations

import datetime
import json
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from e2e import build
from e2e.exporter import Exporter
from e2e.prometheus import pod_target
from e2e.scaling import FAST_WINDOW_S, Role
from gpuscale import versions
from gpuscale.manifests import front_door
from gpuscale.stackfile import load_stack_file
from gpuscale.synth.render import synth_spec
from tests.conftest import STACKS, stack_path


@pytest.mark.parametrize("name", list(versions.E2E_BINARIES))
def test_each_binary_pin_is_the_version_its_chart_deploys_or_states_its_skew(name: str) -> None:
    pin = versions.E2E_BINARIES[name]
    if pin.deploys_as is None:
        assert pin.skew is None
        return
    chart = versions.ALL_CHARTS[pin.deploys_as].version.removeprefix("v")
    if pin.skew is None:
        assert pin.version.removeprefix("v") == chart, f"{name} {pin.version} but the {pin.deploys_as} chart is {chart}"
    else:
        assert pin.version.removeprefix("v") != chart, f"{name} states a skew but equals the chart's {chart}"


def test_the_pins_are_the_charts_versions_and_the_stacks_kubernetes_minor() -> None:
    assert versions.E2E_KARPENTER.version == f"v{versions.KARPENTER.version}"
    assert versions.E2E_KEDA.version == f"v{versions.KEDA.version}"
    assert versions.E2E_LWS.skew and versions.LWS.version == "0.10.0" and versions.E2E_LWS.version == "v0.9.0"
    k8s_minor = ".".join(versions.E2E_KUBERNETES.version.removeprefix("v").split(".")[:2])
    assert k8s_minor == versions.DEFAULT_KUBERNETES_VERSION
    for stack in STACKS:
        assert load_stack_file(stack_path(stack)).environment.kubernetes_version == k8s_minor, stack
    # the version the apiserver reports is the pinned one (Karpenter's version check reads it)
    assert f"-X k8s.io/component-base/version.gitVersion={versions.E2E_KUBERNETES.version}" in \
        versions.E2E_KUBERNETES.ldflags


@pytest.mark.parametrize("name", list(versions.E2E_BINARIES))
def test_each_wrapper_module_requires_the_pinned_version_and_builds_the_pinned_packages(name: str) -> None:
    pin = versions.E2E_BINARIES[name]
    build.check_wrapper(pin)
    assert (build.wrapper(pin) / "go.sum").is_file(), "go.sum pins the hashes of every downloaded module"
    assert not list(build.wrapper(pin).glob("*.go")), "no Go source: the upstream packages are built as tools"


def test_a_wrapper_module_that_drifts_from_its_pin_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pin = versions.E2E_ETCD
    (tmp_path / pin.name).mkdir()
    text = (build.wrapper(pin) / "go.mod").read_text().replace(pin.version, "v3.7.2")
    (tmp_path / pin.name / "go.mod").write_text(text)
    monkeypatch.setattr(build, "WRAPPERS", tmp_path)
    with pytest.raises(build.BuildError, match=r"requires go.etcd.io/etcd/server/v3 v3.7.2, the pin is v3.7.3"):
        build.check_wrapper(pin)


def test_the_cache_lives_outside_the_work_tree_keyed_by_name_and_version(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GPUSCALE_E2E_CACHE", "/var/cache/x")
    assert build.bin_dir(versions.E2E_KEDA) == Path("/var/cache/x/keda-v2.20.2")
    monkeypatch.delenv("GPUSCALE_E2E_CACHE")
    assert build.bin_dir(versions.E2E_KEDA) == Path.home() / ".cache" / "gpuscale-e2e" / "keda-v2.20.2"


def test_time_v_output_gives_cpu_wall_and_memory() -> None:
    text = ("\tUser time (seconds): 100.50\n\tSystem time (seconds): 13.70\n"
            "\tElapsed (wall clock) time (h:mm:ss or m:ss): 1:04:25.5\n\tMaximum resident set size (kbytes): 467763\n")
    cost = build.parse_time_v(text)
    assert (cost.cpu_s, cost.wall_s, cost.max_rss_mib) == (114.2, 3865.5, 456.8)
    with pytest.raises(build.BuildError, match="has no 'Elapsed"):
        build.parse_time_v("nothing")


def test_exporter_serves_vllm_names_and_labels_and_advances_counters_at_the_set_rate() -> None:
    exporter = Exporter()
    try:
        exporter.pod("p0", "llama-8b")
        exporter.update("p0", gauges={"vllm:num_requests_waiting": 3.0},
                        counter_rates={"vllm:prompt_tokens_total": 1000.0},
                        observe={"vllm:request_queue_time_seconds": (2.0, 0.5)})
        start = time.monotonic()
        exporter.pods["p0"].last -= 2.0  # two seconds pass, and then as long as the request takes on a loaded machine
        body = urllib.request.urlopen(f"http://127.0.0.1:{exporter.port}/pods/p0/metrics").read().decode()
        passed_s = 2.0 + time.monotonic() - start
        lines = dict(line.rsplit(" ", 1) for line in body.splitlines() if not line.startswith("#"))
        labels = 'model_name="llama-8b",engine="0"'
        assert float(lines[f"vllm:num_requests_waiting{{{labels}}}"]) == 3.0
        for name, per_s in (("vllm:prompt_tokens_total", 1000.0), ("vllm:request_queue_time_seconds_count", 2.0),
                            ("vllm:request_queue_time_seconds_sum", 1.0)):  # 2 observations a second of 0.5 s
            assert 2.0 * per_s <= float(lines[f"{name}{{{labels}}}"]) <= passed_s * per_s, name
        exporter.door("d")
        exporter.doors["d"].waiting = 1.0
        door = urllib.request.urlopen(f"http://127.0.0.1:{exporter.port}/doors/d/metrics").read().decode()
        assert f"{front_door.QUEUE_METRIC} 1.0" in door
        with pytest.raises(KeyError, match="not a gauge"):
            exporter.update("p0", gauges={"vllm:gpu_cache_usage_perc": 1.0})
    finally:
        exporter.close()


@pytest.fixture(scope="module")
def dev_objects() -> list[dict[str, Any]]:
    result = synth_spec(load_stack_file(stack_path("dev")), stack="dev")
    return [json.loads(json.dumps(obj)) for _, obj in result.kubernetes_objects()]


def test_scrape_target_carries_what_the_podmonitor_relabelling_gives_the_series(
        dev_objects: list[dict[str, Any]]) -> None:
    role = Role.from_synth(dev_objects, "llama-8b", "aggregated")
    target = pod_target("/p", role.pod_monitor, "pod-0", role.deployment["spec"]["template"]["metadata"]["labels"])
    assert target.labels == {"namespace": "inference", "pod": "pod-0", "gpuscale_io_model": "llama-8b",
                             "gpuscale_io_role": "aggregated"}
    assert target.interval_s == int(role.pod_monitor["spec"]["podMetricsEndpoints"][0]["interval"].rstrip("s"))
    # every query the ScaledObject runs selects exactly these labels
    for t in role.spec["triggers"]:
        if t["type"] == "prometheus" and t["name"] != front_door.TRIGGER_NAME:
            assert 'gpuscale_io_role="aggregated"' in t["metadata"]["query"]


def test_the_keda_scenarios_change_only_the_address_and_the_windows(dev_objects: list[dict[str, Any]]) -> None:
    role = Role.from_synth(dev_objects, "llama-8b", "aggregated")
    before = json.loads(json.dumps(role.scaled_object))
    role.point_at("http://127.0.0.1:9")
    role.shorten_windows()
    after = role.scaled_object
    assert all(t["metadata"]["serverAddress"] == "http://127.0.0.1:9" for t in after["spec"]["triggers"]
               if t["type"] == "prometheus")
    for t in after["spec"]["triggers"]:
        t["metadata"].pop("serverAddress", None)
    for t in before["spec"]["triggers"]:
        t["metadata"].pop("serverAddress", None)
    down = after["spec"]["advanced"]["horizontalPodAutoscalerConfig"]["behavior"]["scaleDown"]
    assert down.pop("stabilizationWindowSeconds") == FAST_WINDOW_S
    before["spec"]["advanced"]["horizontalPodAutoscalerConfig"]["behavior"]["scaleDown"].pop(
        "stabilizationWindowSeconds")
    for key in ("cooldownPeriod", "initialCooldownPeriod"):
        assert after["spec"].pop(key) == FAST_WINDOW_S
        before["spec"].pop(key)
    assert after == before
    assert len(role.changes) == 4


def test_the_shortened_windows_outlast_the_guards_rate_windows(dev_objects: list[dict[str, Any]]) -> None:
    """FAST_WINDOW_S keeps the emitted order: the guards' finished-request windows (1 m) plus a scrape and a poll
    end before a scale-down or a scale to zero may begin, so the idle case meets the 0/0 means."""
    from gpuscale.spec.base import duration_seconds

    role = Role.from_synth(dev_objects, "llama-8b", "aggregated")
    windows = role.guard_windows()
    assert {c.metric for _, c in windows} == {"vllm:request_queue_time_seconds_count",
                                              "vllm:inter_token_latency_seconds_count"}
    assert all(t.metric == c.metric.replace("_count", "_sum") and t.matchers == c.matchers for t, c in windows)
    scrape = int(role.pod_monitor["spec"]["podMetricsEndpoints"][0]["interval"].rstrip("s"))
    longest = max(duration_seconds(c.window or "0s") for _, c in windows)
    assert longest + scrape + int(role.spec["pollingInterval"]) < FAST_WINDOW_S


def test_on_kwok_nodes_swaps_the_pool_s_node_class_and_the_scheduler_only(dev_objects: list[dict[str, Any]]) -> None:
    from e2e.karpenter import NODE_CLASS

    role = Role.from_synth(dev_objects, "llama-8b", "aggregated")
    assert role.emitted_pool is not None and role.emitted_pool["metadata"]["name"] == "l40s-spot"
    assert role.zones == ["us-west-2a", "us-west-2b"]
    before = json.loads(json.dumps(role.deployment))
    role.on_kwok_nodes()
    assert role.node_pool is not None
    assert role.node_pool["spec"]["template"]["spec"]["nodeClassRef"]["name"] == NODE_CLASS
    assert "schedulerName" not in role.deployment["spec"]["template"]["spec"]
    before["spec"]["template"]["spec"].pop("schedulerName")
    assert role.deployment == before and len(role.changes) == 2
    assert [o["kind"] for o in role.support] == ["ServiceAccount"]  # no chart values given: no PriorityClass


def test_the_pki_gives_serving_certs_for_127_0_0_1_and_an_admin_client_in_system_masters(tmp_path: Path) -> None:
    import subprocess

    from e2e import certs

    pki = certs.generate(tmp_path)
    text = subprocess.run(["openssl", "x509", "-in", str(pki.webhooks.cert), "-noout", "-text"],
                          capture_output=True, text=True, check=True).stdout
    assert "IP Address:127.0.0.1" in text and "DNS:keda-operator-metrics-apiserver.keda.svc" in text
    subject = subprocess.run(["openssl", "x509", "-in", str(pki.admin.cert), "-noout", "-subject"],
                             capture_output=True, text=True, check=True).stdout
    assert "O = system:masters" in subject and "CN = e2e-admin" in subject
    verify = subprocess.run(["openssl", "verify", "-CAfile", str(pki.ca.cert), str(pki.apiserver.cert)],
                            capture_output=True, text=True, check=False)
    assert verify.returncode == 0, verify.stderr
    assert oct(pki.service_account_key.stat().st_mode)[-3:] == "600"


def test_kwok_instance_types_are_the_catalogue_s_gpu_types_with_their_gpus_and_labels() -> None:
    from e2e.karpenter import instance_types
    from gpuscale.spec.catalogue import CATALOGUE

    types = {t["name"]: t for t in instance_types(["us-east-1b", "us-east-1a"])}
    assert set(types) == set(CATALOGUE)
    g6e = types["g6e.xlarge"]
    assert g6e["resources"]["nvidia.com/gpu"] == str(CATALOGUE["g6e.xlarge"].gpus_per_node)
    offers = {(r["values"][0], z["values"][0]) for o in g6e["offerings"]
              for r in o["Requirements"] if r["key"] == "karpenter.sh/capacity-type"
              for z in o["Requirements"] if z["key"] == "topology.kubernetes.io/zone"}
    assert offers == {(c, z) for c in ("on-demand", "spot") for z in ("us-east-1a", "us-east-1b")}
    keys = {r["key"]: r["values"] for r in g6e["offerings"][0]["Requirements"]}
    assert keys["karpenter.k8s.aws/instance-gpu-name"] == ["l40s"]
    assert keys["karpenter.k8s.aws/instance-family"] == ["g6e"]
    assert "vpc.amazonaws.com/efa" not in g6e["resources"]
    assert types["p5.48xlarge"]["resources"]["vpc.amazonaws.com/efa"] == str(CATALOGUE["p5.48xlarge"].efa_interfaces)


def test_to_kwok_swaps_only_the_node_class_reference(dev_objects: list[dict[str, Any]]) -> None:
    from e2e.karpenter import NODE_CLASS, to_kwok

    pool = next(o for o in dev_objects if o["kind"] == "NodePool" and "nvidia.com/gpu" in o["spec"].get("limits", {}))
    swapped, changes = to_kwok(pool)
    assert swapped["spec"]["template"]["spec"]["nodeClassRef"] == {
        "group": "karpenter.kwok.sh", "kind": "KWOKNodeClass", "name": NODE_CLASS}
    swapped["spec"]["template"]["spec"]["nodeClassRef"] = pool["spec"]["template"]["spec"]["nodeClassRef"]
    assert swapped == pool and len(changes) == 1


def _freeze_active(budget: dict[str, Any], at: datetime.datetime) -> bool:
    """Karpenter v1.14.1's ``Budget.IsActive`` (``pkg/apis/v1/nodepool.go``) for the ``M H * * D`` schedules gpuscale
    emits: active when a hit of the schedule lies in ``(at - duration, at]`` (UTC)."""
    from gpuscale.spec.base import duration_seconds
    from gpuscale.spec.topology import WEEKDAYS

    minute, hour, dom, month, dow = budget["schedule"].split()
    assert (dom, month) == ("*", "*")
    back = datetime.timedelta(seconds=duration_seconds(budget["duration"]))
    day = at.replace(hour=int(hour), minute=int(minute), second=0, microsecond=0)
    hits = [day - datetime.timedelta(days=d) for d in range(9)]
    hits = [h for h in hits if dow == "*" or WEEKDAYS[(h.weekday() + 1) % 7] == dow]
    return any(at - back < h <= at for h in hits)


@pytest.mark.parametrize("pool_name", ["l40s", "h100"])
def test_the_drift_window_moves_to_the_test_s_clock_keeping_its_length(pool_name: str) -> None:
    from e2e.karpenter import drift_window, with_drift_window_at

    objects = [json.loads(json.dumps(o)) for _, o in synth_spec(load_stack_file(stack_path("prod")),
                                                                stack="prod").kubernetes_objects()]
    pool = next(o for o in objects if o["kind"] == "NodePool" and o["metadata"]["name"] == pool_name)
    index, emitted = drift_window(pool)
    now = datetime.datetime(2026, 12, 1, 17, 31, 20, tzinfo=datetime.UTC)  # a Tuesday
    frozen, _ = with_drift_window_at(pool, now + datetime.timedelta(minutes=30))
    opened, change = with_drift_window_at(pool, now - datetime.timedelta(minutes=2))
    assert _freeze_active(frozen[index], now) and _freeze_active(frozen[index], now + datetime.timedelta(minutes=29))
    assert not _freeze_active(frozen[index], now + datetime.timedelta(minutes=31))
    assert not _freeze_active(opened[index], now)
    for budgets in (frozen, opened):
        moved = budgets[index]
        assert moved["nodes"] == "0" and moved["reasons"] == ["Drifted"] and moved["duration"] == pool[
            "spec"]["disruption"]["budgets"][index]["duration"]
        assert [b for i, b in enumerate(budgets) if i != index] == [
            b for i, b in enumerate(pool["spec"]["disruption"]["budgets"]) if i != index]
    assert f"for {emitted.duration}" in change and (emitted.day is None) == opened[index]["schedule"].endswith("*")


def test_the_drift_patch_changes_only_the_template_labels(dev_objects: list[dict[str, Any]]) -> None:
    from e2e.karpenter import DRIFT_LABEL, drifted_template

    pool = next(o for o in dev_objects if o["kind"] == "NodePool" and "nvidia.com/gpu" in o["spec"].get("limits", {}))
    patch = drifted_template(pool)
    assert patch == {"spec": {"template": {"metadata": {"labels": {
        **pool["spec"]["template"]["metadata"]["labels"], DRIFT_LABEL: "1"}}}}}


class FakeKubectl:
    """Records what ``accept`` asks kubectl; rejects the objects named in ``reject`` and warns about ``warn``."""

    def __init__(self, reject: frozenset[str] = frozenset(), warn: frozenset[str] = frozenset()) -> None:
        self.reject, self.warn = reject, warn
        self.applies: list[list[str]] = []
        self.diffs: list[list[str]] = []

    def apply(self, objects: Any, *, check: bool = True, force: bool = True) -> Any:
        from e2e.kube import Result

        names = [o["metadata"]["name"] for o in objects]
        self.applies.append(names)
        bad = [n for n in names if n in self.reject]
        warned = [f"Warning: {n} is deprecated" for n in names if n in self.warn]
        return Result(1 if bad else 0, "", "\n".join([*(f"error: {n}" for n in bad), *warned]))

    def diff(self, obj: Any) -> str:
        names = [o["metadata"]["name"] for o in obj.get("items", [obj])]
        self.diffs.append(names)
        return ""


def _cm(name: str, value: str = "1") -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": "x"}, "data": {"v": value}}


def test_acceptance_applies_in_one_batch_and_names_each_object_only_when_the_batch_is_not_clean() -> None:
    from e2e.acceptance import accept

    clean = FakeKubectl()
    verdict = accept(clean, [_cm("a"), _cm("b")])
    assert verdict.passed and clean.applies == [["a", "b"]] and clean.diffs == [["a", "b"]]
    bad = FakeKubectl(reject=frozenset({"b"}), warn=frozenset({"a"}))
    verdict = accept(bad, [_cm("a"), _cm("b"), _cm("c")])
    assert bad.applies == [["a", "b", "c"], ["a"], ["b"], ["c"]]
    assert list(verdict.rejected) == ["ConfigMap x/b"] and list(verdict.warnings) == ["ConfigMap x/a"]
    assert not verdict.passed


def test_acceptance_skips_only_what_the_cluster_last_accepted_with_the_same_content() -> None:
    from e2e.acceptance import accept

    seen: dict[str, str] = {}
    kubectl = FakeKubectl()
    accept(kubectl, [_cm("a"), _cm("b")], seen)
    verdict = accept(kubectl, [_cm("a"), _cm("b", "2")], seen)
    assert verdict.already_accepted == ["ConfigMap x/a"] and kubectl.applies[-1] == ["b"]
    verdict = accept(kubectl, [_cm("b")], seen)  # b's live copy is now "2": applied and judged again
    assert not verdict.already_accepted and kubectl.applies[-1] == ["b"]
    warned = FakeKubectl(warn=frozenset({"a"}))
    accept(warned, [_cm("a")], seen := {})
    assert seen == {}  # a warned object is judged again next time


ISSUE_SCENARIOS = {
    "acceptance of every shipped stack": ("test_acceptance", "test_apply_stack"),
    "acceptance of the feature grid": ("test_acceptance", "test_apply_feature_grid"),
    "KEDA scales up when the queue rises": ("test_keda", "test_keda_scales_up_when_the_queue_rises"),
    "KEDA scales down when traffic stops": ("test_keda", "test_keda_scales_down_when_traffic_stops"),
    "KEDA holds replicas while Prometheus is unreachable": (
        "test_keda", "test_keda_holds_replicas_while_prometheus_is_unreachable"),
    "KEDA wakes from zero on the door's queue": ("test_keda", "test_keda_wakes_from_zero_on_the_front_door_queue"),
    "Karpenter launches an allowed type with the pool's taint and labels": (
        "test_karpenter", "test_a_pending_gpu_pod_gets_a_node_of_an_allowed_type_with_the_pool_s_taint_and_labels"),
    "Karpenter stops at the GPU limit": ("test_karpenter", "test_the_pool_s_gpu_limit_stops_launches"),
    "Karpenter WhenEmpty": ("test_karpenter", "test_when_empty_removes_the_empty_node_and_never_the_serving_one"),
    "Karpenter drift window and one node at a time": (
        "test_karpenter", "test_drift_waits_for_the_window_then_rolls_one_node_at_a_time_within_the_pdb"),
    "LWS group": ("test_lws", "test_a_multi_node_replica_s_group_has_the_pods_env_and_labels_its_templates_expect"),
}
"""Issue 25's scenarios and the test that runs each: every one takes the ``scenario`` fixture, so it is in
``out/e2e/report.json`` (with ``passed`` and ``observed``, or ``not_run`` and why)."""


@pytest.mark.parametrize("what", list(ISSUE_SCENARIOS))
def test_every_scenario_of_the_issue_has_a_test_that_reports(what: str) -> None:
    import importlib
    import inspect

    module, name = ISSUE_SCENARIOS[what]
    test = getattr(importlib.import_module(f"tests.e2e.{module}"), name, None)
    assert test is not None, f"{what}: no {module}.{name}"
    assert "scenario" in inspect.signature(test).parameters, f"{what}: {name} does not report through the scenario fixture"


def test_a_lane_moves_the_role_to_its_own_namespace_and_pool_and_leaves_the_queries_alone(
        dev_objects: list[dict[str, Any]]) -> None:
    from gpuscale import labels

    role = Role.from_synth(dev_objects, "llama-8b", "aggregated")
    queries = [t["metadata"].get("query") for t in role.spec["triggers"]]
    emitted_pool = json.loads(json.dumps(role.emitted_pool))
    role.isolate("k3")
    role.on_kwok_nodes()
    assert role.namespace == "inference-k3" and role.scaled_object["metadata"]["namespace"] == "inference-k3"
    assert all(o["metadata"]["namespace"] == "inference-k3" for o in role.support if o["kind"] == "ServiceAccount")
    assert role.node_pool is not None and role.node_pool["metadata"]["name"] == "l40s-spot-k3"
    assert role.node_pool["spec"]["template"]["metadata"]["labels"][labels.NODE_POOL_LABEL] == "l40s-spot-k3"
    assert role.deployment["spec"]["template"]["spec"]["nodeSelector"][labels.NODE_POOL_LABEL] == "l40s-spot-k3"
    # the emitted objects the role came from are untouched, and so is every query (each lane has its Prometheus,
    # whose series keep the emitted namespace, as the PodMonitor labels them)
    assert [t["metadata"].get("query") for t in role.spec["triggers"]] == queries
    assert next(o for o in dev_objects if o["kind"] == "NodePool" and o["metadata"]["name"] == "l40s-spot") \
        == emitted_pool
    assert role.pod_name() == "llama-8b-aggregated-k3-sim-0" and role.door_key().endswith("-k3")
    assert any("inference -> inference-k3" in c for c in role.changes)


def test_crds_go_in_batches_bounded_in_size_in_order() -> None:
    from e2e.acceptance import crd_batches

    docs = [{"kind": "CustomResourceDefinition", "metadata": {"name": n}, "spec": {"pad": "x" * size}}
            for n, size in (("a", 10), ("b", 10), ("big", 500), ("c", 10))]
    batches = crd_batches(docs, limit=200)
    assert [[d["metadata"]["name"] for d in b] for b in batches] == [["a", "b"], ["big"], ["c"]]


def test_kubectl_keeps_its_discovery_cache_beside_the_run_s_kubeconfig(tmp_path: Path) -> None:
    from e2e.kube import Kubectl

    kubectl = Kubectl(tmp_path / "cluster" / "kubeconfig")
    assert kubectl.cache_dir == tmp_path / "cluster" / "kubectl-cache"


def test_a_lane_s_verdict_is_its_body_s_and_reaches_the_test_with_what_it_observed(tmp_path: Path) -> None:
    import threading

    from e2e.lanes import Lane, Lanes

    lanes = Lanes(None, tmp_path, None, None, dump=lambda name: tmp_path / f"{name}.json")  # type: ignore[arg-type]
    cleaned: list[str] = []
    release = threading.Event()

    def add(name: str) -> Lane:
        lane = Lane(name, f"k{len(lanes.lanes)}", None, None, None)  # type: ignore[arg-type]
        lanes.lanes[name] = lane
        return lane

    ok, bad = add("ok"), add("bad")

    def passes() -> None:
        release.wait(5)
        ok.observed["replicas"] = 3

    def fails() -> None:
        bad.observed["replicas"] = 1
        raise AssertionError("replicas fell from 3 to 1")

    lanes.run(ok, passes, lambda: cleaned.append("ok"))
    lanes.run(bad, fails, lambda: cleaned.append("bad"))
    with pytest.raises(AssertionError, match="fell from 3 to 1"):
        lanes.join("bad", observed := {})
    assert observed["replicas"] == 1 and observed["dump"] == str(tmp_path / "bad.json") and "wall_s" in observed
    assert not ok.done.is_set()  # side by side: the failed lane did not wait for the other
    release.set()
    lanes.join("ok", observed := {})
    assert observed["replicas"] == 3 and sorted(cleaned) == ["bad", "ok"]
    with pytest.raises(LookupError):
        lanes.join("never", {})


def test_without_go_the_build_fails_loudly_and_says_the_tier_cannot_run(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("GPUSCALE_E2E_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("GPUSCALE_GO", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path / "no-go-here"))
    assert build.main(["etcd"]) == 1
    err = capsys.readouterr().err
    assert "no Go toolchain" in err
    assert "ERROR: 1 of 1 e2e binaries could not be built" in err and "fails here instead of skipping" in err
    assert not (tmp_path / "cache" / f"etcd-{versions.E2E_ETCD.version}").exists()


def test_a_build_that_cannot_reach_the_module_proxy_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GOPROXY", "https://proxy.example")
    stderr = ('go: go.etcd.io/etcd/server/v3@v3.7.3: Get "https://proxy.example/go.etcd.io/...": dial tcp: '
              "lookup proxy.example: no such host")
    assert build.proxy_hint(stderr) == ": the Go module proxy (https://proxy.example) is unreachable or refused a module"
    assert build.proxy_hint("./main.go:3:2: undefined: x") == ""


def test_waiting_for_crds_tolerates_a_status_without_conditions_yet(tmp_path: Path) -> None:
    from e2e.kube import Kubectl, KubectlError

    class Fake(Kubectl):
        def __init__(self, answers: dict[str, list[Any]]) -> None:
            super().__init__(tmp_path / "kubeconfig")
            self.answers = answers

        def read(self, path: str, query: Any = None, *, timeout_s: float = 30) -> Any:
            seq = self.answers[path.rsplit("/", 1)[1]]
            return seq.pop(0) if len(seq) > 1 else seq[0]

    established = {"status": {"conditions": [{"type": "Established", "status": "True"}]}}
    Fake({"a": [{}, {"status": {"conditions": None}}, established], "b": [established]}).wait_established(["a", "b"])
    with pytest.raises(KubectlError, match="not Established after 1 s: never"):
        Fake({"never": [{"status": {}}]}).wait_established(["never"], timeout_s=1)
