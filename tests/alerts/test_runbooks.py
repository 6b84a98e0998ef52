"""The plan sections alerts point at are headings of the plan template, so a renamed section breaks no runbook."""

from __future__ import annotations

from pathlib import Path

from gpuscale.alerts.rule import PLAN_SECTIONS, plan_runbook

TEMPLATE = Path(__file__).resolve().parents[2] / "templates" / "skill-gpu-autoscaler-plan.md.j2"


def test_every_runbook_section_is_a_heading_of_the_plan() -> None:
    headings = {line.strip() for line in TEMPLATE.read_text(encoding="utf-8").splitlines() if line.startswith("#")}
    missing = {key: title for key, title in PLAN_SECTIONS.items() if title not in headings}
    assert missing == {}


def test_a_runbook_names_the_section_and_what_to_do() -> None:
    text = plan_runbook("cold_start", "Find the late stage")
    assert text == "outputs/skill-gpu-autoscaler-plan.md, section 7. Cold start. Find the late stage"
