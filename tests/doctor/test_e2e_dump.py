"""``gpuscale doctor`` on a dump of real controller output, not a built one.

Provenance of ``fixtures/e2e_keda_wake_pending.json``: the e2e tier's
``test_keda_wakes_from_zero_on_the_front_door_queue[zero-min-no-node]`` (run as ``make e2e`` runs it; branch ``kedarun`` on
2026-12-01, at commit f0aeb0f), dev's ``llama-8b/aggregated`` woken from zero
by the real KEDA v2.20.2 on one request held at the door; its Deployment applied as emitted except that its pods use
the default scheduler (KAI cannot be built in that tier) and no NodePool exists, so kube-scheduler v1.36.3 marked the
one GPU pod ``PodScheduled=False/Unschedulable`` ("no nodes available to schedule pods"). The scenario's dump
(``out/e2e/dumps/<scenario>.json``, ``kubectl get ... -o json``) was trimmed to the kinds doctor reads
(``gpuscale.doctor.dump.KINDS``) and the Events of the remaining pod, and ``managedFields`` dropped; nothing else was
edited.
"""

from __future__ import annotations

import json
from pathlib import Path

from tests.cli.runner import FastRunner
from tests.conftest import stack_path

FIXTURE = Path(__file__).parent / "fixtures" / "e2e_keda_wake_pending.json"
runner = FastRunner()


def test_the_fixture_is_kube_scheduler_s_verdict_on_a_pending_gpu_pod() -> None:
    items = json.loads(FIXTURE.read_text())["items"]
    pods = [i for i in items if i["kind"] == "Pod"]
    assert len(pods) == 1 and pods[0]["status"]["phase"] == "Pending"
    assert pods[0]["spec"]["containers"][0]["resources"]["requests"]["nvidia.com/gpu"] == "1"
    assert {(c["type"], c["status"], c["reason"]) for c in pods[0]["status"]["conditions"]} == {
        ("PodScheduled", "False", "Unschedulable")}
    assert {e["reason"] for e in items if e["kind"] == "Event"} == {"FailedScheduling"}
    assert not [i for i in items if i["kind"] == "Node"]


def test_doctor_names_the_layer_and_the_cause_of_the_real_pending_pod(tmp_path: Path) -> None:
    """The pod is addressed to kube-scheduler instead of KAI (the tier's change): doctor says so, layer
    kube-scheduler, rather than blaming Karpenter for the missing node or calling it a normal wait."""
    out = tmp_path / "doctor.json"
    result = runner.invoke(args=["doctor", "--dump", str(FIXTURE), "--stack-file", str(stack_path("dev")),
                                 "--json", str(out)])
    assert result.exit_code == 1, result.output
    assert "Traceback" not in result.output
    doc = json.loads(out.read_text())
    pod = next(i for i in json.loads(FIXTURE.read_text())["items"] if i["kind"] == "Pod")
    assert doc["in_progress"] == []
    assert [(f["pod"], f["layer"]) for f in doc["stuck"]] == [
        (f"inference/{pod['metadata']['name']}", "kube-scheduler")]
    cause = doc["stuck"][0]["cause"]
    assert "addressed to default-scheduler" in cause and "spec.schedulerName: kai-scheduler" in cause
    assert any("spec.schedulerName=default-scheduler" in e for e in doc["stuck"][0]["evidence"])
