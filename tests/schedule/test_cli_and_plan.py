"""``gpuscale schedule`` exit codes and output, and the plan's quote of what KAI leaves Pending at peak."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

import gpuscale.templates
from gpuscale.cli import app
from gpuscale.cli import schedule as schedule_cli
from gpuscale.plan.context import build_context
from gpuscale.plan.evidence import Evidence, ScheduleEvidence, evidence_from_report, schedule_evidence
from gpuscale.plan.render import TEMPLATE, environment
from gpuscale.schedule.report import RoleOutcome, ScheduleReport
from gpuscale.schedule.snapshot import replica_targets
from gpuscale.schedule.stack import Scheduled, schedule_waves
from tests.conftest import stack_path
from tests.schedule.conftest import synthesized

runner = CliRunner()
TROUBLESHOOTING = '## 9. Troubleshooting: "GPUs are free but the pod stays Pending"'
FRAGMENT = "plan_schedule.md.j2"


def test_staging_at_peak_binds_and_exits_0(kai_binary: Path, tmp_path: Path) -> None:
    out = tmp_path / "report.json"
    result = runner.invoke(app, ["schedule", "--stack-file", str(stack_path("staging")), "--replicas", "peak",
                                 "--json", str(out)])
    assert result.exit_code == 0, result.output
    peak = replica_targets(synthesized("staging").sizing, "peak")[("llama-70b", "aggregated")]
    assert "llama-70b/aggregated" in result.output and f"{peak} / {peak}" in result.output
    doc = json.loads(out.read_text())
    assert doc["ok"] is True and doc["replicas"] == "peak"
    assert doc["queues"][1]["name"] == "qa" and doc["queues"][1]["gpus_bound"] == peak * 4


def test_without_go_it_says_what_to_install_and_exits_2(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("GPUSCALE_GO", str(tmp_path / "no-go-here"))
    result = runner.invoke(app, ["schedule", "--stack-file", str(stack_path("dev"))])
    assert result.exit_code == 2
    assert "install Go 1.26" in result.output and "Traceback" not in result.output


def test_invalid_stack_exits_2(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("config:\n  gpuscale:models: 3\n")
    result = runner.invoke(app, ["schedule", "--stack-file", str(bad)])
    assert result.exit_code == 2 and "Traceback" not in result.output


def test_a_warm_minimum_left_pending_exits_1(monkeypatch: pytest.MonkeyPatch) -> None:
    failing = ScheduleReport(
        kai_version="v0.17.0", nodes_per_pool={}, queues=(), evictions=(), sessions=1, notes=(),
        roles=(RoleOutcome(model="m", role="aggregated", queue="q", requested=2, bound=0, warm_minimum=1, gpus_bound=0,
                           reasons=("OverLimit: q quota has reached the allowable limit of GPUs.",)),),
    )

    class _Fake:
        report = failing

    monkeypatch.setattr(schedule_cli, "go_executable", lambda: "go")
    monkeypatch.setattr(schedule_cli, "schedule_level", lambda *a, **k: _Fake())
    result = runner.invoke(app, ["schedule", "--stack-file", str(stack_path("dev"))])
    assert result.exit_code == 1
    assert "WARM MINIMUM PENDING" in result.output and "OverLimit: q quota" in result.output


def _troubleshooting(name: str, schedule: ScheduleEvidence) -> str:
    """The plan's troubleshooting paragraph on KAI's verdict (``templates/plan_schedule.md.j2``)."""
    s = synthesized(name)
    evidence = Evidence(node_manifests=[], simulations=[], schedule=schedule)
    return environment().get_template(FRAGMENT).render(c=build_context(name, s.spec, s.sizing), e=evidence)


def test_the_plan_includes_the_fragment_in_its_troubleshooting_section() -> None:
    template = (Path(gpuscale.templates.__file__).parent / TEMPLATE).read_text()
    section = template[template.index(TROUBLESHOOTING):template.index("## 10.")]
    assert f'{{% include "{FRAGMENT}" %}}' in section


def test_plan_quotes_kai_when_replicas_stay_pending(kai_binary: Path) -> None:
    # prod's ceilings fit chat's quota (issue 12's summed bounds), so ask for two prefill replicas beyond them
    s = synthesized("prod")
    targets = replica_targets(s.sizing, "max")
    targets[("llama-70b-fp8", "prefill")] += 2
    scheduled: Scheduled = schedule_waves(s.spec, s.sizing, s.objects, s.charts, [targets], binary=kai_binary)
    evidence = evidence_from_report(scheduled.report)
    section = _troubleshooting("prod", evidence)
    pending = [r for r in scheduled.report.roles if r.pending]
    assert pending
    for r in pending:
        assert f"`{r.model}/{r.role}`: {r.pending} of {r.requested} replicas stay Pending" in section
    assert "NonPreemptibleOverQuota: Non-preemptible workload is over quota" in section


def test_plan_says_every_replica_binds_at_peak_for_prod(kai_binary: Path) -> None:
    s = synthesized("prod")
    evidence = schedule_evidence(s.spec, s.sizing, s.objects, s.charts)
    assert evidence.computed and evidence.pending == []
    section = _troubleshooting("prod", evidence)
    assert "every replica binds." in section and "KAI Scheduler v0.17.0 over 8 x p5.48xlarge (h100)" in section


def test_plan_says_why_it_did_not_ask_kai(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("GPUSCALE_GO", str(tmp_path / "no-go-here"))
    s = synthesized("dev")
    evidence = schedule_evidence(s.spec, s.sizing, s.objects, s.charts)
    assert not evidence.computed
    section = _troubleshooting("dev", evidence)
    assert "not computed: gpuscale schedule runs the real KAI Scheduler" in section and "install Go" in section
