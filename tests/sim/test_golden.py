"""Golden results: the JSON of a handful of short runs on the shipped stacks, hashed, so a refactor of the simulator
that changes any number (an outcome, a latency, a GPU-second, an event) fails here, case by case.

The cases cover what each layer does differently: disaggregated P/D with KV transfers and cache-aware routing,
aggregated serving under every autoscaler, scale from zero behind the front door (with prewarm), multi-pod gangs on
a fragmented cluster, spot interruptions, a drift rollout, underutilised consolidation, and the Cluster Autoscaler
path, and KV preemptions at saturation. Each runs in about two seconds or less.

A change that is meant to move numbers updates ``GOLDEN`` in the same commit and says in its message which numbers
moved and why (``GPUSCALE_GOLDEN_DUMP=DIR`` writes each case's JSON there, to diff before and after).
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

import pytest

from gpuscale.sim.runner import Runner
from gpuscale.sim.scenarios import build_scenario
from gpuscale.sim.traffic import TraceTraffic
from tests.sim.conftest import spec_of, write_prefix_trace

CASES: dict[str, tuple[str, str, float | None, float | None]] = {
    # id: (stack, scenario, duration_s, spot interruptions per node-hour)
    "prod-stack-pd": ("prod", "stack", 300.0, None),
    "staging-stack-aggregated": ("staging", "stack", 300.0, None),
    "dev-scale-from-zero": ("dev", "scale-from-zero", 3600.0, None),
    "staging-scale-from-zero": ("staging", "scale-from-zero", 3600.0, None),
    "prod-peak-hour-preemptions": ("prod", "peak-hour", 600.0, None),
    "prod-gang-7-of-8": ("prod", "gang-7-of-8", 600.0, None),
    "dev-stack-spot": ("dev", "stack", 900.0, 6.0),
    "staging-ami-rollout": ("staging", "ami-rollout", 1800.0, None),
    "staging-consolidation": ("staging", "consolidation-24x7", 3600.0, None),
    "prod-2am-huge-prompt": ("prod", "2am-huge-prompt", None, None),
    "prod-prefix-trace-pd": ("prod", "trace", None, None),
}

GOLDEN: dict[str, str] = {
    "dev-scale-from-zero": "33d2c9087aff9b82",
    "dev-stack-spot": "f19e3df45d5c37d8",
    "prod-2am-huge-prompt": "e77c54a4ccd7b9b8",
    "prod-gang-7-of-8": "edf729de14ec4fd6",
    "prod-peak-hour-preemptions": "764a4adfb8203f29",
    "prod-prefix-trace-pd": "727f198e46e8c0d4",
    "prod-stack-pd": "b5ef167db24ea386",
    "staging-ami-rollout": "d9b1a585ed0d1d5c",
    "staging-consolidation": "2de73ce0904251d1",
    "staging-scale-from-zero": "1b7e66aafc3c210c",
    "staging-stack-aggregated": "51915aa49c6f070a",
}


def result_json(case: str, tmp_path: Path) -> str:
    stack, scenario, duration_s, spot = CASES[case]
    trace = None
    if scenario == "trace":  # prefix ids: the prefix cache and the P/D router's cache-aware pick
        trace = TraceTraffic(path=write_prefix_trace(tmp_path / "prefix.csv", groups=40, per_bucket=12))
    sc = build_scenario(scenario, spec_of(stack), duration_s=duration_s, trace=trace, spot_interruptions_per_node_hour=spot)
    return json.dumps(without_added_keys(Runner(sc, seed=0).run().model_dump(mode="json")), sort_keys=True)


ADDED_KEYS = {"traffic": {"warmup_s": 0.0, "warmup_requests": 0}, "result": {"lower_bound_note": None}}
"""Keys the results gained after these hashes were taken, at the values that change nothing (a cold start, a finite
lower bound): left out of the hash so it still checks every number the existing policies produced. A key at another
value stays in, and fails the hash."""


ADDED_MEASUREMENTS = {"nodes": ("scale_ups", "scale_up_ready_mean_s", "scale_up_ready_p90_s")}
"""Measurements the results gained after these hashes were taken, read off runs that did not change (each placed
replica's creation-to-ready time): left out whatever their value, so the hash still checks every number the
existing policies produced and the new ones are tested where they are defined (``tests/sim/test_headroom_*``)."""


def without_added_keys(doc: dict[str, Any]) -> dict[str, Any]:
    def strip(d: dict[str, Any], added: dict[str, object]) -> dict[str, Any]:
        return {k: v for k, v in d.items() if not (k in added and v == added[k])}

    def unmeasured(r: dict[str, Any]) -> dict[str, Any]:
        nodes = {k: v for k, v in r["nodes"].items() if k not in ADDED_MEASUREMENTS["nodes"]}
        return {**strip(r, ADDED_KEYS["result"]), "nodes": nodes}

    return {**doc, "traffic": strip(doc["traffic"], ADDED_KEYS["traffic"]),
            "results": [unmeasured(r) for r in doc["results"]]}


@pytest.mark.parametrize("case", sorted(CASES))
def test_simulation_results_are_unchanged(case: str, tmp_path: Path) -> None:
    text = result_json(case, tmp_path)
    dump = os.environ.get("GPUSCALE_GOLDEN_DUMP")
    if dump:
        Path(dump).mkdir(parents=True, exist_ok=True)
        (Path(dump) / f"{case}.json").write_text(text)
    assert hashlib.sha256(text.encode()).hexdigest()[:16] == GOLDEN[case], case
