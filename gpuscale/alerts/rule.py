"""One alerting rule as a typed structure, the runbooks alerts point at, and the body prometheus-operator reads."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from gpuscale.spec.base import Spec

Severity = Literal["critical", "warning"]
"""``critical``: users see errors or the SLO burns fast (page); ``warning``: a limit binds or a slow burn (ticket)."""

PLAN = "outputs/skill-gpu-autoscaler-plan.md"
"""The plan document ``gpuscale plan`` writes (per stack: ``outputs/<stack>/``)."""
PLAN_SECTIONS: dict[str, str] = {
    "nodes": "## 4. Layer 1: nodes (Karpenter)",
    "scheduling": "## 5. Layer 2: scheduling (KAI Scheduler)",
    "replicas": "## 6. Layer 3: replicas (app-level signals)",
    "cold_start": "## 7. Cold start",
    "front_door": "### The front door: scale from zero that answers the first request",
    "troubleshooting": '## 9. Troubleshooting: "GPUs are free but the pod stays Pending"',
}
"""Headings of the plan template (``templates/skill-gpu-autoscaler-plan.md.j2``) the runbooks name;
``tests/alerts/test_runbooks.py`` checks each is still a heading there."""
DOCTOR = "gpuscale doctor --dump <kubectl get pods,nodes,events,nodeclaims.karpenter.sh,nodepools.karpenter.sh,podgroups.scheduling.run.ai,queues.scheduling.run.ai -A -o json>"
"""The command that says which layer holds a Pending pod (``docs/doctor.md``)."""


def plan_runbook(section: str, then: str = "") -> str:
    """A runbook annotation: the plan section that explains the alert, and what to do next."""
    where = f"{PLAN}, section {PLAN_SECTIONS[section].lstrip('#').strip()}"
    return f"{where}. {then}" if then else where


def doctor_runbook(section: str) -> str:
    return plan_runbook(section, f"Which layer holds the pending pods: {DOCTOR} (docs/doctor.md)")


def camel(text: str) -> str:
    """``llama-70b-fp8`` -> ``Llama70bFp8``: alert names carry the model, role, pool or queue they are about."""
    return "".join(part[:1].upper() + part[1:] for part in text.replace("_", "-").split("-") if part)


def duration(seconds: float) -> str:
    """A Prometheus duration in whole seconds (``for``, range selectors): at least 1 s, rounded up."""
    return f"{max(1, -(-int(seconds * 1000) // 1000))}s"


class AlertRule(Spec):
    """One ``alert`` rule; ``thresholds`` names every number the expression or ``for`` was built from, with its value,
    so a test can compare each with its source in the spec or the sizing."""

    alert: str = Field(pattern=r"^[A-Za-z][A-Za-z0-9]*$")
    expr: str
    for_s: int = Field(ge=0)
    severity: Severity
    summary: str
    description: str
    runbook: str
    labels: dict[str, str] = {}
    """Labels the alert carries besides ``severity`` (model, role, pool or queue: what Alertmanager routes on)."""
    thresholds: dict[str, float]
    """``<spec or sizing field>`` -> the value used (``slo.ttft_p99_s``, ``role.max_replicas``, ...)."""

    def body(self) -> dict[str, Any]:
        """The rule as prometheus-operator's ``spec.groups[].rules[]`` item."""
        rule: dict[str, Any] = {"alert": self.alert, "expr": self.expr}
        if self.for_s:
            rule["for"] = duration(self.for_s)
        rule["labels"] = {**self.labels, "severity": self.severity}
        rule["annotations"] = {"summary": self.summary, "description": self.description, "runbook": self.runbook}
        return rule


class RuleGroup(Spec):
    name: str
    rules: list[AlertRule]

    def body(self) -> dict[str, Any]:
        return {"name": self.name, "rules": [r.body() for r in self.rules]}
