"""Which signals a role scales on, built from sizing's numbers (``SignalSizing``); primary (load) first.

Backend keda: the load signal is the replicas the SLO needs (``PrefillSlo``, ``DecodeSlo``, ``LoadSlo``) unless the
stack sets ``target_utilisation`` (then ``PrefillLoad``, ``DecodeLoad``, ``Load`` at it); prefill [load, prompt backlog, queue-time guard], decode [decode load, KV use, ITL guard],
aggregated [load, prompt backlog, KV use, both guards]; the backlog in burst mode, the guards with ``slo_guard``.
Backend hpa (per-pod prometheus-adapter metrics): prefill [prompt-token rate, queue depth], decode [output-token rate,
KV use], aggregated [prompt-token rate, queue depth, KV use]. A stack file's ``autoscaling.<role>.metric``/``target``
replace the primary signal, and a default signal reading the same single metric is dropped.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from gpuscale.signals import vllm_metrics as vm
from gpuscale.signals.base import Signal, SignalSizing
from gpuscale.signals.decode_load import DecodeLoad
from gpuscale.signals.decode_slo import DecodeSlo
from gpuscale.signals.front_door_queue import FrontDoorQueue
from gpuscale.signals.gauge import VllmGauge
from gpuscale.signals.itl import ItlGuard
from gpuscale.signals.load import Load
from gpuscale.signals.load_slo import LoadSlo
from gpuscale.signals.prefill_load import PrefillLoad
from gpuscale.signals.prefill_slo import PrefillSlo
from gpuscale.signals.prompt_backlog import PromptBacklog
from gpuscale.signals.queue_time import QueueTimeGuard
from gpuscale.signals.rate import VllmRate

AnySignal = Annotated[
    PrefillLoad | DecodeLoad | Load | PrefillSlo | DecodeSlo | LoadSlo | PromptBacklog | QueueTimeGuard | ItlGuard | VllmGauge | VllmRate | FrontDoorQueue,
    Field(discriminator="kind"),
]
"""Every signal kind (a sizing result round-trips through JSON with its kind)."""


def single(n: SignalSizing, metric: str) -> Signal:
    """The single-metric signal on ``metric`` (a gauge, or a counter's rate)."""
    return VllmRate.sized(n, metric) if metric in vm.COUNTERS else VllmGauge.sized(n, metric)


def load_signal(n: SignalSizing) -> Signal:
    """The role's load signal: replicas needed for the SLO (``slo_target``) unless the stack sets a utilisation."""
    if n.derived:
        return PrefillSlo.sized(n) if n.role == "prefill" else DecodeSlo.sized(n) if n.role == "decode" else LoadSlo.sized(n)
    return PrefillLoad.sized(n) if n.role == "prefill" else DecodeLoad.sized(n) if n.role == "decode" else Load.sized(n)


def keda_signals(n: SignalSizing, burst: bool, guard: bool) -> list[Signal]:
    role = n.role
    load = load_signal(n)
    out: list[Signal] = [load]
    if burst and role != "decode":
        out.append(PromptBacklog.sized(n))
    if role != "prefill":
        out.append(VllmGauge.sized(n, vm.KV_CACHE))
    if guard:
        if role != "decode":
            out.append(QueueTimeGuard.sized(n))
        if role != "prefill":
            out.append(ItlGuard.sized(n))
    return out


def hpa_signals(n: SignalSizing, burst: bool) -> list[Signal]:
    role = n.role
    out: list[Signal] = []
    if role == "decode":
        return [single(n, vm.GENERATION_TOKENS), single(n, vm.KV_CACHE)]
    out.append(single(n, vm.PROMPT_TOKENS))
    if burst:
        out.append(single(n, vm.QUEUE))
    if role == "aggregated":
        out.append(single(n, vm.KV_CACHE))
    return out


def role_signals(
    n: SignalSizing, *, keda: bool, burst: bool, guard: bool, metric: str | None = None, target: float | None = None,
) -> list[Signal]:
    """The role's signals; ``metric``/``target`` are the stack file's ``autoscaling.<role>`` overrides."""
    signals = keda_signals(n, burst, guard) if keda else hpa_signals(n, burst)
    if metric is None and target is None:
        return signals
    default = vm.KV_CACHE if n.role == "decode" else vm.PROMPT_TOKENS
    primary = single(n, metric if metric is not None else default).model_copy(update={"purpose": "load"})
    where = f"autoscaling.{n.role}"
    if target is not None:
        primary = primary.model_copy(update={
            "target": target,
            "why": f"{where}.target {target:g} set in the stack file (sizing would derive {primary.target:g}: {primary.why})",
        })
    else:
        primary = primary.model_copy(update={"why": f"{where}.metric set in the stack file; {primary.why}"})
    # the stack's metric replaces the load signal; a default signal that reads the same metric is not repeated
    return [primary] + [x for x in signals[1:] if not (x.single_metric and x.metric == primary.metric)]


def waker(signals: list[Signal]) -> int:
    """Index of the signal the sized activation threshold sits on: the one reading the queue (a waiting request wakes
    the role), else the primary."""
    return next((i for i, x in enumerate(signals) if x.metric == vm.QUEUE), 0)


def activation(signals: list[Signal], sized_threshold: float, signal: Signal) -> float:
    """KEDA 0 <-> 1: the sized threshold on the waker; every other trigger activates above 0, so the role stays awake
    while prompts flow or any request still holds KV."""
    return sized_threshold if signal is signals[waker(signals)] else 0.0
