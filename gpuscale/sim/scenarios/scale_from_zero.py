"""``scale-from-zero``: idle hours, the first requests of the day, bursts, a quiet lunch, the afternoon; at zero replicas.

Compared on a model that may scale to zero, everything starting from no replica and no node:

* ``cron-only``: the working-hours schedule alone (a KEDA cron trigger, the stack's ``wake_schedule`` or 08:00-19:00);
  outside it nothing holds a request, so a Service with no endpoint refuses the connection;
* ``front-door``: the front door holds requests at zero and its queue wakes the model, with the stack's cold start;
* ``front-door+fastest``: the same with the fastest cold start the stack allows (the pool's best image pull, the
  compile cache; ``gpuscale.first_answer.fastest_cold_start``);
* ``front-door+fastest+prewarm``: plus a placeholder that asks for a node the moment the door first holds a request,
  before KEDA has created the model's pod (item 6 of the design: kept only if it shortens the first answer);
* ``warm-minimum``: one replica kept warm all day (``min_replicas: 1``), the usual alternative.
"""

from __future__ import annotations

import math

from pydantic import Field

from gpuscale import sizing as sizing_mod
from gpuscale.first_answer import fastest_cold_start
from gpuscale.sim import nodes as N
from gpuscale.sim.inputs import FrontDoorSim
from gpuscale.sim.metrics import PolicyResult, ScenarioResult
from gpuscale.sim.policies import GpuscalePolicy, WakeWindow
from gpuscale.sim.scenarios.base import (
    Scenario,
    ScenarioDef,
    ScenarioParams,
    fmt_s,
    make_setup,
    register,
    synthetic,
    variant,
)
from gpuscale.sim.traffic import HugePrompt, RatePoint
from gpuscale.spec.base import Spec
from gpuscale.spec.model import ModelDeployment, WakeSchedule
from gpuscale.spec.platform import PlatformSpec

DEFAULT_WAKE = WakeSchedule(start="0 8 * * 1-5", end="0 19 * * 1-5")
"""The working-hours schedule compared when the stack sets none."""
PHASES_S = {"idle": 3 * 3600.0, "early": 900.0, "morning": 5400.0, "lunch": 2700.0, "afternoon": 1800.0}
"""The day at full length (6 h): idle night, early birds before the schedule opens, the morning, a lunch gap longer
than the idle window (the model goes back to zero), the afternoon. ``duration_s`` scales every phase."""
FIRST_LABEL = "first-of-the-day"


class ScaleFromZeroParams(ScenarioParams):
    early_rps_share: float = Field(default=0.25, gt=0, le=1)
    """Rate of the early birds, as a share of the base rate."""


class Timeline(Spec):
    idle_s: float
    early_s: float
    morning_s: float
    lunch_s: float
    afternoon_s: float

    @property
    def first_at_s(self) -> float:
        return self.idle_s

    @property
    def opens_s(self) -> float:
        """When the working-hours schedule opens (the early birds come before it)."""
        return self.idle_s + self.early_s

    @property
    def lunch_at_s(self) -> float:
        return self.opens_s + self.morning_s

    @property
    def back_s(self) -> float:
        return self.lunch_at_s + self.lunch_s

    @property
    def end_s(self) -> float:
        return self.back_s + self.afternoon_s


def timeline(duration_s: float | None) -> Timeline:
    scale = (duration_s / sum(PHASES_S.values())) if duration_s else 1.0
    return Timeline(**{f"{k}_s": v * scale for k, v in PHASES_S.items()})


def zero_models(spec: PlatformSpec) -> list[ModelDeployment]:
    """The models that may scale to zero (the plan runs this scenario for each)."""
    return [m for m in spec.models if m.may_scale_to_zero and m.autoscaling.backend == "keda"]


def first_zero_model(spec: PlatformSpec) -> ModelDeployment:
    """The first model that may scale to zero, else the first model (then run as a what-if)."""
    models = zero_models(spec)
    return models[0] if models else spec.models[0]


def at_zero(model: ModelDeployment) -> ModelDeployment:
    """``model`` with every role's minimum at 0, behind a front door, on KEDA: the set-up this scenario compares (the
    model itself when it already scales to zero; a what-if for a model that keeps warm replicas)."""
    scaling = model.autoscaling.model_copy(update={
        "backend": "keda",
        **{r: model.autoscaling.role(r).model_copy(update={"min_replicas": 0}) for r in model.serving.roles},
    })
    return model.model_copy(update={
        "autoscaling": scaling, "front_door": model.front_door.model_copy(update={"enabled": True}),
    })


def window_hours(w: WakeSchedule) -> float:
    """Hours from ``start`` to ``end`` when both are daily ``M H`` cron times, else the default 11 h."""
    def at(expr: str) -> float | None:
        minute, hour = expr.split()[:2]
        return int(hour) + int(minute) / 60 if minute.isdigit() and hour.isdigit() else None

    start, end = at(w.start), at(w.end)
    return (end - start) % 24 if start is not None and end is not None and end != start else 11.0


def build(spec: PlatformSpec, model: ModelDeployment, p: ScenarioParams) -> Scenario:
    assert isinstance(p, ScaleFromZeroParams)
    tl = timeline(p.duration_s)
    what_if = not (model.may_scale_to_zero and model.autoscaling.backend == "keda")
    door_model = at_zero(model)
    ms = sizing_mod.size_model(spec, door_model)
    assert ms.front_door is not None
    pool = spec.topology.pool(model.node_pool)
    inst = pool.instances[[it.name for it in pool.instances].index(ms.shape.instance_type)]
    fast = fastest_cold_start(door_model, pool, spec.topology.provisioning, inst, sizing_mod.weights_gib(model))
    fast_door = ms.front_door.model_copy(update={"retry_after_s": math.ceil(ms.front_door.first_answer.detection_s + fast.total_s)})
    w = model.workload
    profile = [
        RatePoint(t_s=0.0, rps=0.0), RatePoint(t_s=tl.first_at_s, rps=0.0),
        RatePoint(t_s=tl.first_at_s + 1e-3, rps=w.base_rps * p.early_rps_share), RatePoint(t_s=tl.opens_s, rps=w.base_rps),
        RatePoint(t_s=tl.lunch_at_s, rps=w.base_rps), RatePoint(t_s=tl.lunch_at_s + 1e-3, rps=0.0),
        RatePoint(t_s=tl.back_s, rps=0.0), RatePoint(t_s=tl.back_s + 1e-3, rps=w.base_rps),
    ]
    traffic = synthetic(model, profile, bursts=True).model_copy(update={"huge_prompts": [HugePrompt(
        at_s=tl.first_at_s, prompt_tokens=round(w.prompt_tokens.mean), output_tokens=round(w.output_tokens.mean),
        label=FIRST_LABEL,
    )]})
    setup = make_setup(spec, door_model, ms, tl.end_s, initial=lambda r: 0,
                       spot_rate_per_node_hour=p.spot_interruptions_per_node_hour)
    schedule = next((model.autoscaling.role(r).wake_schedule for r in model.serving.roles
                     if model.autoscaling.role(r).wake_schedule is not None), None) or DEFAULT_WAKE
    window = WakeWindow(start_s=tl.opens_s, end_s=tl.opens_s + window_hours(schedule) * 3600.0, replicas=schedule.replicas)
    role0 = model.autoscaling.role(model.serving.roles[0])
    door = FrontDoorSim.from_sizing(ms.front_door)
    cold = GpuscalePolicy(min_replicas=0, activation_threshold=0.0)
    at_door = cold.model_copy(update={"front_door_per_replica": ms.front_door.per_replica})
    variants = [
        variant("cron-only", f"no front door: a KEDA cron trigger holds {schedule.replicas} replica(s) from "
                f"{schedule.start} to {schedule.end} ({schedule.timezone}); outside it a request finds no endpoint",
                cold.model_copy(update={"wake_windows": [window], "cooldown_s": float(role0.cooldown_s),
                                        "sync_period_s": float(role0.polling_interval_s)}),
                spec, model, at_zero="connection-refused"),
        variant("front-door", f"the front door holds requests at zero (hold limit {ms.front_door.hold_limit_s} s, queue "
                f"bound {ms.front_door.queue_bound}) and wakes the model; the stack's cold start "
                f"({ms.cold_start.total_s:.0f} s)", at_door, spec, model, front_door=door),
        variant("front-door+fastest", f"the same with the fastest cold start the stack allows ({fast.total_s:.0f} s: image "
                f"pull {fast.image_pull}, engine {fast.engine_start})", at_door, spec, model,
                front_door=FrontDoorSim.from_sizing(fast_door), startup=N.startup_of(fast)),
        variant("front-door+fastest+prewarm", "plus a placeholder that asks for a node when the door first holds a "
                "request at zero", at_door, spec, model, front_door=FrontDoorSim.from_sizing(fast_door),
                startup=N.startup_of(fast), prewarm=True),
        variant("warm-minimum", "no front door, one replica warm all day (min_replicas: 1)",
                GpuscalePolicy(min_replicas=1), spec, model, initial_replicas={r.role: 1 for r in setup.roles}),
    ]
    first_answer = ms.front_door.first_answer
    return Scenario(
        name="scale-from-zero",
        description=(
            f"{model.name} starts at zero replicas on no node" + (" (a what-if: the stack keeps it warm)" if what_if else "")
            + f". {tl.idle_s / 3600:.1f} h idle, then early birds at "
            f"{w.base_rps * p.early_rps_share:g} req/s for {tl.early_s / 60:.0f} min before the working-hours schedule "
            f"opens, {w.base_rps:g} req/s with the stack's bursts for {tl.morning_s / 60:.0f} min, {tl.lunch_s / 60:.0f} "
            f"min without a request, {tl.afternoon_s / 60:.0f} min more. Sizing's first answer from zero on a fresh "
            f"node: {first_answer.total_s:.0f} s with the stack's cold start against a "
            f"{model.slo.request_timeout_s:g} s request timeout."
        ),
        setup=setup, traffic=traffic, variants=variants,
        parameters={
            "idle_s": round(tl.idle_s), "first_request_s": round(tl.first_at_s), "schedule_opens_s": round(tl.opens_s),
            "lunch_from_s": round(tl.lunch_at_s), "back_s": round(tl.back_s), "base_rps": w.base_rps,
            "cold_start_s": round(ms.cold_start.total_s, 1), "fastest_cold_start_s": round(fast.total_s, 1),
            "fastest_image_pull": fast.image_pull, "first_answer_s": round(first_answer.total_s, 1),
            "hold_limit_s": ms.front_door.hold_limit_s, "queue_bound": ms.front_door.queue_bound,
            "retry_after_s": ms.front_door.retry_after_s, "idle_window_s": ms.front_door.idle_window_s,
            "request_timeout_s": model.slo.request_timeout_s, "wake_start": schedule.start, "wake_end": schedule.end,
            "what_if": what_if,
        },
    )


def answered(r: PolicyResult) -> int:
    return r.completed


def lost(r: PolicyResult) -> int:
    """Neither answered nor refused with a ``Retry-After``: timed out, refused a connection, lost in flight."""
    return r.dropped_timeout + r.lost_in_flight


def first_of_day(r: PolicyResult) -> str:
    t = r.tracked_request(FIRST_LABEL)
    return t.outcome.replace("_", " ") + (f" after {t.ttft_s:.0f} s" if t.ttft_s is not None else "")


def findings(sc: Scenario, res: ScenarioResult) -> list[str]:
    out = [
        f"{r.name}: the first request of the day {first_of_day(r)}; first answer {fmt_s(r.first_answer_s)} after the "
        f"first request; {answered(r):,} answered, {r.refused:,} refused with Retry-After, {lost(r):,} lost; "
        f"{r.gpu_hours:,.2f} GPU-h"
        for r in res.results
    ]
    by = {r.name: r for r in res.results}
    cron, door, fast, warm = by.get("cron-only"), by.get("front-door"), by.get("front-door+fastest"), by.get("warm-minimum")
    if cron is not None and door is not None:
        out.append(
            f"the front door answers {answered(door) - answered(cron):+,} requests against the cron schedule "
            f"({lost(cron):,} lost by cron-only, {lost(door):,} by the front door) for {door.gpu_hours - cron.gpu_hours:+.2f} GPU-h"
        )
    if door is not None and fast is not None and door.first_answer_s is not None and fast.first_answer_s is not None:
        out.append(
            f"the fastest cold start the stack allows ({sc.parameters['fastest_image_pull']} image pull, compile cache) "
            f"brings the first answer from {door.first_answer_s:.0f} s to {fast.first_answer_s:.0f} s"
        )
    pre = by.get("front-door+fastest+prewarm")
    if fast is not None and pre is not None and fast.first_answer_s is not None and pre.first_answer_s is not None:
        gain = fast.first_answer_s - pre.first_answer_s
        out.append(
            f"pre-warming a node at the first hold changes the first answer by {-gain:+.0f} s "
            f"({-gain / fast.first_answer_s:+.0%}) and GPU-hours by {pre.gpu_hours - fast.gpu_hours:+.2f}"
        )
    if warm is not None and door is not None:
        out.append(
            f"keeping one replica warm instead costs {warm.gpu_hours - door.gpu_hours:+.2f} GPU-h over the "
            f"{res.duration_s / 3600:.1f} h and answers {answered(warm) - answered(door):+,} requests more than the front door"
        )
    return out


register(ScenarioDef(
    name="scale-from-zero", summary="idle hours, the first requests of the day, bursts: cron vs front door vs a faster cold start",
    params=ScaleFromZeroParams, build=build, findings=findings, plan_section="cold-start", plan_order=5,
    pick_model=first_zero_model, plan_models=zero_models,
    columns=("policy", "first_of_day", "first_answer", "answered", "refused", "lost", "gpu_hours"),
))
