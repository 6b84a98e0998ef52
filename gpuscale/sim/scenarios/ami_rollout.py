"""``ami-rollout``: every GPU node drifts under load (an AMI bump) and Karpenter replaces them one at a time.

Compared: the NodePool gpuscale emits (no ``terminationGracePeriod``: a node drains only while each role's PDB keeps its
ready floor, pods get their own grace) against a grace period of the longest request timeout + 2 min (what gpuscale
emitted before): drift then ignores PDBs and ``do-not-disrupt`` and deletes the pods with their requests in flight when
it elapses. Both replace a node only after its replacement is up (Karpenter pre-spins it) and run the same warm minimums
and autoscaler, so the difference is the grace period alone.
"""

from __future__ import annotations

import math

from gpuscale import sizing as sizing_mod
from gpuscale.manifests.vllm import drain_timing
from gpuscale.sim import nodes as N
from gpuscale.sim.metrics import PolicyResult, ScenarioResult
from gpuscale.sim.policies import GpuscalePolicy
from gpuscale.sim.scenarios.base import Scenario, ScenarioDef, ScenarioParams, make_setup, register, synthetic, variant
from gpuscale.sim.traffic import plateau_profile
from gpuscale.spec.model import ModelDeployment
from gpuscale.spec.platform import PlatformSpec

DRIFT_AT_S = 600.0
"""The AMI bump lands ten minutes in, once the replicas the load needs are up."""
OLD_DRAIN_MARGIN_S = 120.0
"""The margin gpuscale's old NodePools added to the longest request timeout for ``terminationGracePeriod``."""


class AmiRolloutParams(ScenarioParams):
    pass


def old_grace_period_s(spec: PlatformSpec, model: ModelDeployment) -> float:
    """``terminationGracePeriod`` as gpuscale emitted it before: longest request timeout of the pool + 2 min, in minutes."""
    timeouts = [m.slo.request_timeout_s for m in spec.models if m.node_pool == model.node_pool]
    return math.ceil((max(timeouts) + OLD_DRAIN_MARGIN_S) / 60.0) * 60.0


PDB_VARIANT = "no-grace-period+pdb"
"""gpuscale's NodePool; the other variant is the grace period it replaced, whose nodes wait for nothing but time."""


def build(spec: PlatformSpec, model: ModelDeployment, p: ScenarioParams) -> Scenario:
    d = p.duration_s or 2 * 3600.0
    ms = sizing_mod.size_model(spec, model)
    w = model.workload
    load = (w.base_rps + w.peak_rps) / 2  # under load: halfway between base and peak, held for the whole run
    profile = plateau_profile(load, load, d, rise_at=0.0, peak_from=0.0, peak_until=1.0, back_at=1.0)
    at = min(DRIFT_AT_S, d / 4)
    floors = {r.role: r.pdb_min_available for r in ms.roles}
    grace = float(drain_timing(model).termination_grace_period_s)
    tgp = old_grace_period_s(spec, model)
    variants = [
        variant(PDB_VARIANT, "gpuscale's NodePool: no terminationGracePeriod, drift waits for each role's PDB "
                f"ready floor ({', '.join(f'{k} {v}' for k, v in floors.items())}); pods drain for {grace:.0f} s",
                GpuscalePolicy(), spec, model,
                drift=N.DriftRollout(at_s=at, drain_grace_s=grace, ready_floor=floors)),
        variant(f"grace-period-{tgp / 60:g}m", f"terminationGracePeriod {tgp / 60:g}m (before): drift ignores PDBs and "
                "do-not-disrupt; pods are deleted with their requests when it elapses",
                GpuscalePolicy(), spec, model, drift=N.DriftRollout(at_s=at, force_after_s=tgp)),
    ]
    return Scenario(
        name="ami-rollout",
        description=(
            f"An AMI bump {at / 60:g} min in drifts every GPU node of {model.name}'s pool while {load:g} req/s keep "
            "arriving; Karpenter replaces one node at a time, launching the replacement first. Compared: gpuscale's "
            "NodePool (no grace period, PDB ready floors) and a terminationGracePeriod that overrides them."
        ),
        setup=make_setup(spec, model, ms, d), traffic=synthetic(model, profile, bursts=False), variants=variants,
        parameters={"drift_at_s": at, "load_rps": load, "old_grace_period_s": tgp, "pod_grace_s": grace,
                    **{f"ready_floor_{k}": v for k, v in floors.items()}},
    )


def min_ready_after(r: PolicyResult, at_s: float) -> dict[str, int]:
    """Per role, the fewest ready replicas sampled from the drift on."""
    out: dict[str, int] = {}
    for role in r.series.roles:
        after = [n for t, n in zip(r.series.t_s, role.ready, strict=True) if t >= at_s]
        out[role.role] = min(after) if after else 0
    return out


def findings(sc: Scenario, res: ScenarioResult) -> list[str]:
    at = float(sc.parameters["drift_at_s"])
    out = []
    for r in res.results:
        ready = ", ".join(f"{k} {v}" for k, v in min_ready_after(r, at).items())
        out.append(
            f"{r.name}: {r.lost_in_flight:,} requests lost in flight, {r.unanswered:,} unanswered of {r.arrived:,}; "
            f"{r.slo_attainment:.1%} on time; fewest ready replicas during the rollout: {ready}; {r.evictions} evictions"
            + (" (the PDB floors held every drifted node: the rollout waits until a role has a spare ready replica)"
               if r.evictions == 0 and r.name == PDB_VARIANT else "")
        )
    return out


register(ScenarioDef(
    name="ami-rollout", summary="every GPU node drifts under load: PDB floors vs a terminationGracePeriod",
    params=AmiRolloutParams, build=build, findings=findings, plan_section="layer1", plan_order=5,
    columns=("policy", "lost_unanswered", "attainment", "min_ready", "evictions", "gpu_hours"),
))
