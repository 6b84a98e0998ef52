"""Run Prometheus' own rule evaluator (``promtool``) over emitted rules: ``check rules`` and ``test rules``.

Debian's ``prometheus`` package ships promtool; the tests that need it skip, saying so, when it is absent.
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpuscale.alerts.rule import AlertRule

PROMTOOL = shutil.which("promtool")
requires_promtool = pytest.mark.skipif(
    PROMTOOL is None, reason="promtool is not installed (apt-get install prometheus ships it)"
)


def run(*args: str) -> subprocess.CompletedProcess[str]:
    assert PROMTOOL is not None
    return subprocess.run([PROMTOOL, *args], capture_output=True, text=True, timeout=120, check=False)


def write_rules(path: Path, groups: list[dict[str, Any]]) -> Path:
    path.write_text(yaml.safe_dump({"groups": groups}, sort_keys=False), encoding="utf-8")
    return path


def check_rules(path: Path) -> subprocess.CompletedProcess[str]:
    return run("check", "rules", str(path))


@dataclass(frozen=True)
class Case:
    """Synthetic series, an instant, and whether the alert must be firing then (with which series labels)."""

    name: str
    series: dict[str, str]
    """``'metric{labels}'`` -> promtool's expanding notation (``'0+1x60'``, ``'NaN x10'``)."""
    eval_time: str
    fires: bool
    series_labels: dict[str, str] = field(default_factory=dict)
    """Labels of the firing element that come from the series (the rule's own labels are added)."""


def promtool_test(tmp_path: Path, rule: AlertRule, cases: list[Case], interval: str = "15s") -> subprocess.CompletedProcess[str]:
    """``promtool test rules`` of ``rule`` alone over each case."""
    rules = write_rules(tmp_path / "rules.yaml", [{"name": "under-test", "rules": [rule.body()]}])
    body = rule.body()
    tests = []
    for case in cases:
        expected = [{
            "exp_labels": {**case.series_labels, **body["labels"]},
            "exp_annotations": body["annotations"],
        }] if case.fires else []
        tests.append({
            "name": case.name,
            "interval": interval,
            "input_series": [{"series": s, "values": v} for s, v in case.series.items()],
            "alert_rule_test": [{"eval_time": case.eval_time, "alertname": rule.alert, "exp_alerts": expected}],
        })
    spec = tmp_path / "test.yaml"
    spec.write_text(yaml.safe_dump({"rule_files": [rules.name], "evaluation_interval": interval, "tests": tests},
                                   sort_keys=False), encoding="utf-8")
    return run("test", "rules", str(spec))


def expr_matches(query: str, value: float, rel: float = 1e-9) -> str:
    """A query that answers 1 exactly when ``query`` answers ``value`` within ``rel`` (promtool compares the samples of
    a ``promql_expr_test`` exactly, and our float sums need not match Prometheus' to the last bit); an empty ``query``
    answers nothing, which the test's expected sample then misses."""
    return f"abs(({query}) - {value!r}) <= bool {rel * max(abs(value), 1.0)!r}"


def promtool_expr_test(
    tmp_path: Path, series: dict[str, list[float]], checks: list[tuple[str, str]], interval: str = "15s",
) -> subprocess.CompletedProcess[str]:
    """``promtool test rules`` with no rule: each ``(eval_time, query)`` of ``checks`` must answer the label-less sample
    1 (``expr_matches``) over ``series`` (``'metric{labels}'`` -> one value per ``interval`` from time 0)."""
    rules = write_rules(tmp_path / "rules.yaml", [])
    tests = [{
        "interval": interval,
        "input_series": [{"series": s, "values": " ".join(repr(float(v)) for v in values)} for s, values in series.items()],
        "promql_expr_test": [{"expr": q, "eval_time": at, "exp_samples": [{"labels": "{}", "value": 1}]} for at, q in checks],
    }]
    spec = tmp_path / "test.yaml"
    spec.write_text(yaml.safe_dump({"rule_files": [rules.name], "evaluation_interval": interval, "tests": tests},
                                   sort_keys=False), encoding="utf-8")
    return run("test", "rules", str(spec))
