"""What every autoscaling signal is: one class per kind (``gpuscale.signals.<kind>``) owning its label, rationale,
target, PromQL, KEDA trigger or HPA metric, and the value the simulator observes, all from one expression tree.

A signal's query is *total*: whenever Prometheus answers, it answers a number. A ratio whose denominator is 0 (no
request finished in the window) and a selector with no series (a role at zero pods) read 0 rather than NaN or an
empty result, because KEDA v2.20.2's prometheus scaler turns either into an error with ``ignoreNullValues: false``
(``pkg/scalers/prometheus_scaler.go`` L266-305), and an erroring trigger freezes the role (``gpuscale.signals
.keda_model``). The cdk8s-plus ``Metric`` class is the model: the object that names a metric also renders it.
"""

from __future__ import annotations

from abc import abstractmethod
from typing import Any, ClassVar, Literal

from gpuscale.signals import promql, vllm_metrics
from gpuscale.signals.promql import Expr, Matcher, Samples
from gpuscale.spec.base import Spec
from gpuscale.spec.model import Role

RATE_WINDOW = "1m"
RATE_WINDOW_S = 60.0
"""``rate()`` window of counter signals: four 15 s scrapes, so one missed scrape still leaves a rate; the simulator
measures the same window."""
MEAN_PROMPT_WINDOW = "5m"
MEAN_PROMPT_WINDOW_S = 300.0
"""Window of the recent mean prompt (``vllm:request_prompt_tokens`` sum over count): long enough to hold finished
requests at light load, short enough to follow a change of traffic within minutes."""
WINDOW_S: dict[str, float] = {RATE_WINDOW: RATE_WINDOW_S, MEAN_PROMPT_WINDOW: MEAN_PROMPT_WINDOW_S}

SignalPurpose = Literal["load", "burst", "saturation", "guard"]
MetricType = Literal["AverageValue", "Value"]
ROLES: tuple[Role, ...] = ("aggregated", "prefill", "decode")


class SignalCoefficients(Spec):
    """The per-replica costs a composite signal multiplies its metrics by (``gpuscale.perf`` step model)."""

    prefill_s_per_token: float
    """Linear layers per prompt token (1 / prefill tokens per second)."""
    prefill_s_per_pair: float
    """Causal attention per (prompt token x earlier token) pair."""
    decode_s_per_token: float
    """Per generated token: its linear layers and per-sequence work."""
    decode_s_per_kv_share: float
    """Per generated token per unit of KV share (context / KV capacity): the KV read of a full cache."""
    prompt_tokens_fallback: float
    """Mean prompt used until requests have finished (the workload's mean)."""
    decode_itl_lines: tuple[tuple[float, float], ...] = ()
    """Replica-seconds per output token at the ITL target as ``max_i(a_i + b_i x KV share)``: the step model's decode
    capacity at a context of that share (``sizing.itl_capacity_lines``); empty: no batch meets the ITL target, and
    decode work falls back to the per-token cost (``decode_s_per_token``, ``decode_s_per_kv_share``)."""
    prefill_stall: float = 1.0
    """Aggregated replicas: a replica's share of prefill work counts this many times (``sizing.prefill_stall``). Every
    step that carries a prefill chunk holds every decoding sequence's next token, so a sequence's TPOT is the decode
    step over the share of time left to decode steps: ``step / (1 - p) <= budget`` leaves prefill at most ``1 - step /
    budget`` of a replica, and the step never falls below its fixed part (overhead + one read of the weights). 1 for a
    role that does not decode (prefill) or does not prefill (decode), and where no step meets the budget."""

    prefill_fill_s_per_token: float = 0.0
    """Pipeline parallelism: what a prompt alone waits beyond its compute, per token of its first chunk. Its chunks cross
    the stages one micro-batch each, a stage holding 1/pp of the layers on 1/pp of the GPUs, so they stream at the
    replica's rate, but the last one still crosses the ``pp - 1`` stages after the first: ``(pp - 1) x s/token x
    min(prompt, chunk)`` more (``perf.StepCost.pipelined_prefill_s``, compute-bound). 0 without it."""
    prefill_chunk_tokens: int = 0
    """The chunked-prefill budget a micro-batch carries (``max_num_batched_tokens``), with ``prefill_fill_s_per_token``."""

    def prefill_s(self, mean_prompt: float) -> float:
        """Prefill seconds per prompt token at this mean prompt length."""
        return self.prefill_s_per_token + self.prefill_s_per_pair * mean_prompt / 2.0


class SignalSizing(Spec):
    """The numbers sizing derives for one role, from which each signal class takes its target and rationale."""

    role: Role
    utilisation: float
    """Share of a replica's capacity the load signal targets."""
    coefficients: SignalCoefficients
    prompt_tokens_mean: float
    prompt_tokens_p99: float = 0.0
    """The workload's p99 prompt: with the mean, the shape of the prompt mix (queueing factor, tail prompt)."""
    derived: bool = False
    """The load signal's target is derived from the SLO and the observed traffic (``gpuscale.signals.slo_target``),
    not a utilisation (the stack sets no ``target_utilisation``)."""
    output_tokens_mean: float
    output_tokens_p99: float = 0.0
    """The workload's p99 output: with the mean, the output mix's shape (the counting noise of the decode work)."""
    mean_decode_context: float
    ttft_p99_s: float
    itl_p99_s: float
    itl_headroom: float
    """Share of the ITL p99 target decode batches are sized to (``sizing.ITL_HEADROOM``)."""
    decode_batch: int
    """Sequences per replica that meet the ITL target within KV capacity."""
    kv_capacity_tokens: int
    decode_tokens_per_s: float
    replicas_per_rps: float
    """Replicas the load signal holds per request per second of the workload's token mix."""
    kv_target: float
    """KV use of the ITL batch (``sizing.decode_kv_target``)."""
    kv_ceiling: float
    """The highest KV target (``sizing.KV_TARGET_UTILISATION``)."""
    cold_start_s: float
    """A replica's cold start on a fresh node (``ModelSizing.cold_start``): how far ahead the burst headroom looks."""

    @property
    def prefill_tokens_per_s(self) -> float:
        return 1.0 / self.coefficients.prefill_s(self.prompt_tokens_mean)

    @property
    def percent(self) -> str:
        return f"{self.utilisation:.0%}"


def role_matchers(namespace: str, model: str, role: str, model_label: str, role_label: str) -> tuple[Matcher, ...]:
    """This model's pods of exactly one role (the PodMonitor's ``podTargetLabels``)."""
    if role not in ROLES:
        raise ValueError(
            f"role {role!r}: an autoscaler query must select exactly one of {', '.join(ROLES)}; one query over "
            "prefill and decode together scales the wrong role. Give each role its own autoscaler"
        )
    return (("namespace", "=", namespace), (model_label, "=", model), (role_label, "=", role))


def total(e: Expr) -> Expr:
    """The query answers 0 when it would be empty: no pod of the role reports (it is at zero, or still loading)."""
    return promql.Otherwise(e, 0.0)


def mean_prompt(sel: tuple[Matcher, ...], fallback: float) -> Expr:
    """The recent mean prompt of finished requests, the workload's mean while none has finished (``> 0`` drops a zero
    count, so the ratio is never NaN; ``or`` then supplies the fallback)."""
    m = vllm_metrics.REQUEST_PROMPT_TOKENS
    ratio = promql.Series(f"{m}_sum", sel, MEAN_PROMPT_WINDOW) / promql.Above(promql.Series(f"{m}_count", sel, MEAN_PROMPT_WINDOW), 0.0)
    return promql.Otherwise(ratio, fallback)


def prefill_cost(sel: tuple[Matcher, ...], c: SignalCoefficients) -> Expr:
    """Seconds a prompt token costs at the recent mean prompt: ``s/token + s/pair / 2 x mean prompt``."""
    return promql.Number(c.prefill_s_per_token) + promql.Number(c.prefill_s_per_pair / 2.0) * mean_prompt(sel, c.prompt_tokens_fallback)


class Signal(Spec):
    """One metric an autoscaler scales a role on; the HPA takes the largest replica count over a role's signals."""

    kind: str
    metric: str
    """The vLLM metric the signal is about (a gauge, a ``*_total`` counter or a histogram's base name)."""
    target: float
    """Per-replica target (``AverageValue``: the HPA wants ``ceil(sum / target)`` replicas), or the latency target
    (``Value``: ``ceil(ready x value / target)``)."""
    purpose: SignalPurpose = "load"
    """``load``: proportional to traffic, holds the count; ``burst``: reads 0 unless work queues; ``saturation``: KV
    about to run out; ``guard``: measured latency against the SLO."""
    why: str
    """One sentence on what the signal measures and where the target comes from (shown in the plan)."""

    metric_type: ClassVar[MetricType] = "AverageValue"
    single_metric: ClassVar[bool] = False
    """True: one vLLM metric per pod, which prometheus-adapter can serve to a plain HPA (backend ``hpa``)."""

    @property
    @abstractmethod
    def label(self) -> str:
        """How the signal reads in tables."""

    @abstractmethod
    def expr(self, sel: tuple[Matcher, ...]) -> Expr:
        """The trigger's query over the pods ``sel`` selects (total: see the module docstring)."""

    @property
    def trigger_name(self) -> str:
        """The KEDA trigger's name: ``prefill-load``, ``prompt-backlog``, ``queue-time``...."""
        return self.kind.replace("_", "-")

    def observe(self, samples: Samples) -> float:
        """What the trigger's query reads on these samples (the simulator's scrape; the KEDA model's Prometheus)."""
        return self.answer(self.expr(()).evaluate(samples))

    def answer(self, result: promql.Result) -> float:
        """The trigger's value from its query's result (``observe``; the simulator's controller answers a role's
        queries together, ``promql.Plan``)."""
        value = promql.value_of(result)
        if value is None:  # pragma: no cover - total() rules it out; kept so a partial query cannot pass silently
            raise ValueError(f"{self.kind}: the query is empty on these samples; wrap it in total()")
        return value

    def keda_trigger(self, server: str, query: str, activation: float | None) -> dict[str, Any]:
        """The ``prometheus`` trigger of a ScaledObject reading ``query`` (``expr`` over the role's selector, rendered);
        ``activation`` None: the role never scales to zero."""
        metadata = {
            "serverAddress": server,
            "query": query,
            "threshold": f"{self.target:g}",
            # every query is total (it answers 0 for no series and for a ratio over no requests), so an empty or NaN
            # answer can only come from a broken query: an error the fallback holds, not a 0 that scales the role down
            "ignoreNullValues": "false",
        }
        if activation is not None:
            metadata["activationThreshold"] = f"{activation:g}"  # 0 <-> 1 is decided by activation, not threshold
        return {"type": "prometheus", "name": self.trigger_name, "metricType": self.metric_type, "metadata": metadata}


class CostedSignal(Signal):
    """A signal that weighs vLLM's token counts by what a token costs on this replica (``SignalCoefficients``)."""

    coefficients: SignalCoefficients


def adapter_metric_name(metric: str, kind: str = "gauge") -> str:
    """The name prometheus-adapter serves a vLLM metric under: a gauge with ``:`` renamed to ``_``; a counter's
    per-second rate as ``..._per_second`` (``vllm:prompt_tokens_total`` -> ``vllm_prompt_tokens_per_second``)."""
    name = metric.replace(":", "_")
    return f"{name.removesuffix('_total')}_per_second" if kind == "rate" else name


def quantity(x: float) -> str:
    """A Kubernetes quantity: ``3`` or ``800m``."""
    if float(x).is_integer():
        return str(int(x))
    return f"{round(x * 1000)}m"


class SingleMetric(Signal):
    """One vLLM metric per pod: a KEDA trigger named after the metric, or a ``Pods`` metric of a plain HPA that
    prometheus-adapter serves (backend ``hpa``)."""

    single_metric: ClassVar[bool] = True

    @property
    def trigger_name(self) -> str:
        """``vllm:kv_cache_usage_perc`` -> ``kv-cache-usage-perc``."""
        return self.metric.split(":", 1)[-1].replace("_", "-")

    def hpa_metric(self, match_labels: dict[str, str]) -> dict[str, Any]:
        """The autoscaling/v2 ``Pods`` metric: the per-pod average at the target (the HPA reads only its target's
        pods, and ``match_labels`` pins the role as well)."""
        return {
            "type": "Pods",
            "pods": {
                "metric": {"name": adapter_metric_name(self.metric, self.kind), "selector": {"matchLabels": match_labels}},
                "target": {"type": "AverageValue", "averageValue": quantity(self.target)},
            },
        }
