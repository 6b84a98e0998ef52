"""Render the plan document from a typed ``PlanContext`` (jinja2, StrictUndefined, deterministic)."""

from __future__ import annotations

from pathlib import Path

import jinja2

import gpuscale.templates
from gpuscale.plan.context import PlanContext
from gpuscale.plan.evidence import Evidence
from gpuscale.plan.goal_commentary import commentary
from gpuscale.plan.goal_table import GoalTable, summaries

TEMPLATE = "skill-gpu-autoscaler-plan.md.j2"
DEFAULT_OUT = Path("outputs") / "skill-gpu-autoscaler-plan.md"


def environment() -> jinja2.Environment:
    """The one jinja2 environment: Markdown output (no autoescape); a missing variable fails the render."""
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(Path(gpuscale.templates.__file__).parent),
        undefined=jinja2.StrictUndefined,
        autoescape=False,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    env.globals["summaries"] = summaries
    return env


def render_plan(context: PlanContext, evidence: Evidence, template: str = TEMPLATE) -> str:
    text = environment().get_template(template).render(c=context, e=evidence)
    # collapse runs of blank lines left by conditional blocks, so diffs stay about content
    lines: list[str] = []
    for line in text.splitlines():
        if line.strip() == "" and lines and lines[-1].strip() == "":
            continue
        lines.append(line.rstrip())
    return "\n".join(lines).rstrip("\n") + "\n"


def goal_table_markdown(table: GoalTable) -> str:
    """Every cell of a ``bench/goal_table.py`` result, as the plan shows a stack's (``docs/simulator.md`` quotes it)."""
    return environment().get_template("plan_goal_table.md.j2").render(g=table, cells=table.cells)


def goal_commentary_markdown(table: GoalTable) -> str:
    """Why each goal is missed, per run and cell, from the table's numbers (``docs/simulator.md``, under the table)."""
    return environment().get_template("goal_table_commentary.md.j2").render(k=commentary(table))


def goal_table_docs(table: GoalTable) -> str:
    """What ``docs/simulator.md`` shows between its goal-table markers: the table, then the commentary."""
    return f"{goal_table_markdown(table)}\n{goal_commentary_markdown(table)}"
