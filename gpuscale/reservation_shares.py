"""Which part of a pool's capacity reservations each model's simulation runs in and is billed for: the one split
(``guardrails.reservations.split_instances``, in proportion to each model's GPUs at peak) that the simulator's set-up,
``validate`` and the plan read, so a reservation two models share is billed once in all three."""

from __future__ import annotations

from collections.abc import Sequence

from gpuscale import sizing as sizing_mod
from gpuscale.guardrails import reservations as rules
from gpuscale.sizing import ModelSizing
from gpuscale.spec.base import Spec
from gpuscale.spec.model import ModelDeployment
from gpuscale.spec.platform import PlatformSpec


class ReservationShare(Spec):
    """One model's part of its pool's reserved instances of its sized instance type."""

    pool: str
    model: str
    instance_type: str
    instances: int
    """Reserved instances this model's simulation may launch into and pays for."""
    usd_per_hour: float
    """That share of what the pool's reservations of the instance type bill per hour, used or not."""
    pool_instances: int
    """All the pool's reserved instances of the type (what the pool is billed for, once)."""
    pool_usd_per_hour: float
    shared_with: list[str]
    """The other models on the pool whose replicas run on the same instance type."""
    peak_gpus: int
    """GPUs the model needs at its peak (the split's weight)."""


def shares(spec: PlatformSpec, sizings: Sequence[ModelSizing]) -> dict[str, ReservationShare]:
    """Model name -> its share, for every model whose pool holds reserved instances of its instance type."""
    by_name = {m.name: m for m in spec.models}
    groups: dict[tuple[str, str], list[ModelSizing]] = {}
    for ms in sizings:
        groups.setdefault((by_name[ms.model].node_pool, ms.shape.instance_type), []).append(ms)
    out: dict[str, ReservationShare] = {}
    for (pool_name, kind), members in groups.items():
        count, usd = spec.topology.pool(pool_name).reserved_instances(kind)
        if count == 0:
            continue
        peak = {ms.model: sum(r.replicas_at_peak for r in ms.roles) * ms.shape.gpus for ms in members}
        split = rules.split_instances(count, [(ms.model, float(peak[ms.model])) for ms in members])
        for ms in members:
            n = split[ms.model]
            out[ms.model] = ReservationShare(
                pool=pool_name, model=ms.model, instance_type=kind, instances=n, usd_per_hour=round(usd * n / count, 6),
                pool_instances=count, pool_usd_per_hour=usd, peak_gpus=peak[ms.model],
                shared_with=[m.model for m in members if m.model != ms.model],
            )
    return out


def share_of(spec: PlatformSpec, model: ModelDeployment, ms: ModelSizing) -> ReservationShare | None:
    """``model``'s share as sized in ``ms`` (a variant of a stack model replaces it), its neighbours on the pool sized
    as the stack sizes them; None when the pool reserves none of its instance type."""
    pool = spec.topology.pool(model.node_pool)
    if pool.reserved_instances(ms.shape.instance_type)[0] == 0:
        return None
    on_pool = [model if m.name == model.name else m for m in spec.models if m.node_pool == model.node_pool]
    if model not in on_pool:
        on_pool.append(model)
    # in the stack's order, so the split's ties fall the same way in every model's run (and in the plan)
    sized = sizing_mod.size_models(spec, on_pool) if len(on_pool) > 1 else [ms]
    return shares(spec, [ms if s.model == model.name else s for s in sized]).get(model.name)
