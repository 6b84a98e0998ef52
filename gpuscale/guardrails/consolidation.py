"""GPU pools never repack: ``WhenEmpty`` and a ``consolidateAfter`` floor, unless acknowledged.

The floor is ``max(1h, cold start)``, one number with one reason: an empty GPU node is worth keeping as long as
replacing it would cost. Replacing it costs a cold start (node, image, weights, engine) paid in GPU-seconds and in
requests that wait, so a node removed sooner than one cold start after it emptied loses more than it saves whenever
traffic returns (the rent-or-buy break-even). The hour on top of it covers the dips a cold start does not: lunch, a
deploy, a retry storm's quiet tail, which the simulator's ``consolidation-24x7`` scenario replays. A pool's cold start
is the slowest of the models placed on it (``gpuscale.sizing.slowest_cold_start`` over ``ModelSizing.cold_start``).

Who knows what: the spec validator (``GpuNodePoolSpec``) has no sizing, so it applies the rule with the cold start
unknown, which is the 1h floor; the feasibility checks apply it again after sizing, with every model's cold start. The policy pack
reads a NodePool: its policy, ``consolidateAfter``, the acknowledgement annotation and the cold start gpuscale writes
as the ``gpuscale.io/cold-start-seconds`` annotation (absent on NodePools gpuscale did not emit: the 1h floor). For a
stack gpuscale emits, validate and the pack therefore see the same four facts and reach the same verdict.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from gpuscale import labels

GPU_POOL_CONSOLIDATION_POLICY: Literal["WhenEmpty"] = "WhenEmpty"
"""The only consolidation policy that never evicts a serving pod: Karpenter removes a node only once it is empty."""
MIN_CONSOLIDATE_AFTER_S = 3600.0
"""The floor's fixed part: a GPU node stays at least an hour after its last pod left."""
MIN_CONSOLIDATE_AFTER = "1h"
"""``MIN_CONSOLIDATE_AFTER_S`` as a Karpenter duration (the default ``consolidate_after`` and the advice)."""
NODEPOOL_DEFAULT_POLICY = "WhenEmptyOrUnderutilized"
NODEPOOL_DEFAULT_CONSOLIDATE_AFTER = "0s"
"""What a NodePool that leaves them out gets: ``consolidationPolicy`` defaults to ``WhenEmptyOrUnderutilized`` and the
``disruption`` object to ``{consolidateAfter: 0s}`` (``karpenter.sh_nodepools.yaml`` of Karpenter v1.14.1, the pinned
chart's CRD)."""

BreachField = Literal["policy", "after"]


@dataclass(frozen=True)
class Surface:
    """How one reader names the rule's fields and its override (the spec's YAML keys or the NodePool's)."""

    policy: str
    after: str
    override: str

    def name(self, field: BreachField) -> str:
        """This reader's name of one of the rule's fields."""
        return self.policy if field == "policy" else self.after


SPEC = Surface(
    policy="consolidation_policy", after="consolidate_after",
    override="set acknowledge_underutilized_consolidation_evicts_inference: true",
)
NODEPOOL = Surface(
    policy="consolidationPolicy", after="consolidateAfter",
    override=f'annotate the NodePool {labels.ACK_UNSAFE_CONSOLIDATION_ANNOTATION}: "true"',
)


def floor_s(cold_start_s: float | None) -> float:
    """The shortest ``consolidate_after`` a GPU pool may have: ``max(1h, cold start)`` (the hour when unknown)."""
    return max(MIN_CONSOLIDATE_AFTER_S, cold_start_s or 0.0)


def floor_text(cold_start_s: float | None) -> str:
    """The floor as advice: ``1h``, or the cold start rounded up to whole minutes when it is longer."""
    floor = floor_s(cold_start_s)
    # whole minutes rounded up from the exact floor (a 3600.5 s cold start needs 61m: 60m would be refused again)
    return MIN_CONSOLIDATE_AFTER if floor == MIN_CONSOLIDATE_AFTER_S else f"{math.ceil(floor / 60)}m"


def breaches(
    surface: Surface, *, pool: str, policy: str, after: str, after_s: float | None, cold_start_s: float | None,
    cold_start_of: str = "", acknowledged: bool = False,
) -> list[tuple[BreachField, str]]:
    """``(field, message)`` for each way a GPU pool's disruption settings break the rule; [] when they keep it.

    ``after_s`` is ``after`` parsed (None when it is not a duration); ``cold_start_of`` names whose cold start sets the
    floor (``"llama-70b"``), shown when it is above the hour.
    """
    if acknowledged:
        return []
    out: list[tuple[BreachField, str]] = []
    floor = floor_text(cold_start_s)
    keeps_floor = after_s is not None and after_s >= floor_s(cold_start_s)
    if policy != GPU_POOL_CONSOLIDATION_POLICY:
        # name the floor only where the pool's own consolidate_after does not keep it (never "use 1h" to a 2h pool)
        fix = GPU_POOL_CONSOLIDATION_POLICY + ("" if keeps_floor else f" with {surface.after}: {floor}")
        out.append(("policy", (
            f"GPU pool {pool}: {surface.policy} {policy} lets Karpenter evict in-flight inference to repack nodes "
            f"(every evicted replica drops its requests and reloads the model, minutes). Use "
            f"{fix}, or {surface.override} to accept it"
        )))
    if after_s is None:
        out.append(("after", f"GPU pool {pool}: {surface.after} {after!r} is not a Karpenter duration (e.g. 1h, 90m, Never)"))
    elif after_s < floor_s(cold_start_s):
        longer = cold_start_s is not None and cold_start_s > MIN_CONSOLIDATE_AFTER_S
        why = (f"the cold start of {cold_start_of or 'its slowest model'} ({math.ceil(cold_start_s or 0.0)} s)"
               if longer else MIN_CONSOLIDATE_AFTER)
        out.append(("after", (
            f"GPU pool {pool}: {surface.after} {after} is shorter than {why}; a GPU node emptied by a brief dip is "
            "gone when traffic returns, and the next replica pays a full cold start (node + image + weights + "
            f"engine). Use {surface.after}: {floor} or longer, or {surface.override}"
        )))
    return out
