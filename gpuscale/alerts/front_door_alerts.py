"""The front door's alerts: requests held near the queue bound, and requests held past the hold limit (answered 503).

The held count is the door's KEDA signal (``autoscaling.front_door_signal``) over the door's series
(``front_door.queue_matchers``): the alert reads the query that wakes the model.
"""

from __future__ import annotations

from gpuscale.alerts import exporter_metrics as m
from gpuscale.alerts.rule import AlertRule, camel, plan_runbook
from gpuscale.manifests import autoscaling, front_door
from gpuscale.sizing import PlatformSizing
from gpuscale.spec.platform import PlatformSpec

HELD_SHARE = 0.8
"""Share of the queue bound (``front_door.queue_bound``) held at which to warn: the door answers 503 to whatever
arrives past the bound, and a burst one-fifth the bound's size takes it there."""


def front_door_rules(spec: PlatformSpec, sizing: PlatformSizing, model_name: str) -> list[AlertRule]:
    model = next(x for x in spec.models if x.name == model_name)
    door = sizing.model(model_name).front_door
    if door is None:
        return []
    ns = model.serving.namespace
    sel = front_door.queue_matchers(model.name, ns)
    held = autoscaling.front_door_signal(door.per_replica).expr(sel).render()
    limit = HELD_SHARE * door.queue_bound
    outcomes = ",".join(f'{k}{op}"{v}"' for k, op, v in sel)
    labels = {"model": model.name, "namespace": ns}
    prefix = camel(model.name)
    return [
        AlertRule(
            alert=f"{prefix}FrontDoorNearQueueBound",
            expr=f"({held}) > {limit:.6g}",
            for_s=door.retry_after_s, severity="warning", labels=labels,
            summary=f"{model.name}: the front door holds more than {HELD_SHARE:.0%} of its queue bound ({door.queue_bound})",
            description=(f"Above {limit:g} held requests for {door.retry_after_s} s (a wake from zero: detection plus "
                         f"cold start); past {door.queue_bound} the door answers 503 with Retry-After at once."),
            runbook=plan_runbook("front_door", "Are replicas coming up? gpuscale doctor names what holds a Pending pod"),
            thresholds={"front_door.queue_bound": door.queue_bound, "front_door.retry_after_s": door.retry_after_s},
        ),
        AlertRule(
            alert=f"{prefix}FrontDoorHeldPastHoldLimit",
            expr=(f'sum(increase({m.EPP_REQUESTS}{{{outcomes},outcome=~"{m.EPP_OUTCOME_TTL}|{m.EPP_OUTCOME_CAPACITY}"}}'
                  f"[{door.hold_limit_s + door.poll_s}s])) > 0"),
            for_s=0, severity="critical", labels=labels,
            summary=f"{model.name}: the front door answered 503 (held past {door.hold_limit_s} s, or beyond its queue bound)",
            description=(f"Requests left the door as {m.EPP_OUTCOME_TTL} (held longer than the hold limit, "
                         f"{door.hold_limit_s} s) or {m.EPP_OUTCOME_CAPACITY} (more than {door.queue_bound} held): "
                         "the model did not come up in time for them."),
            runbook=plan_runbook("front_door", "Compare the cold start with the sized stages (plan section 7)"),
            thresholds={"front_door.hold_limit_s": door.hold_limit_s, "front_door.queue_bound": door.queue_bound},
        ),
    ]
