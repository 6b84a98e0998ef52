"""``out/e2e/report.json``: every scenario's verdict and what it observed, and the versions that ran."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpuscale.versions import E2E_BINARIES


@dataclass
class Timeline:
    """A value sampled over a scenario (the Deployment's replicas, a node count), with the phase it was sampled in."""

    samples: list[dict[str, Any]] = field(default_factory=list)
    start: float = field(default_factory=time.monotonic)

    def add(self, phase: str, value: Any) -> None:
        self.samples.append({"t_s": round(time.monotonic() - self.start, 1), "phase": phase, "value": value})

    def values(self, phase: str) -> list[Any]:
        return [s["value"] for s in self.samples if s["phase"] == phase]


@dataclass
class Report:
    path: Path
    scenarios: list[dict[str, Any]] = field(default_factory=list)
    extra_versions: dict[str, str] = field(default_factory=dict)

    def record(self, name: str, passed: bool, observed: Any) -> None:
        self.scenarios = [s for s in self.scenarios if s["name"] != name]
        self.scenarios.append({"name": name, "passed": passed, "observed": observed})
        self.write()

    def versions(self) -> dict[str, str]:
        out = {f"{p.name}": f"{p.module}@{p.version}" for p in E2E_BINARIES.values()}
        return {**out, **self.extra_versions}

    def write(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        doc = {"scenarios": self.scenarios, "versions": self.versions()}
        tmp = self.path.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(doc, indent=2, default=str) + "\n", encoding="utf-8")
        tmp.replace(self.path)
