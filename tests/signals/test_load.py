"""The aggregated role's work: its prefill weighed by the decode steps it holds (``sizing.prefill_stall``)."""

from __future__ import annotations

import numpy as np

from gpuscale import perf
from gpuscale.signals.load import aggregated_work
from gpuscale.signals.promql import evaluate
from gpuscale.signals.slo_target import SteadySamples
from gpuscale.sim import replica_load
from gpuscale.sizing import ITL_HEADROOM, prefill_stall, replica_shape, signal_coefficients, size_platform
from gpuscale.spec.platform import PlatformSpec


def _staging(spec: PlatformSpec) -> tuple[replica_load.ReplicaModel, perf.StepCost]:
    m = spec.models[0]
    pool = spec.topology.pool(m.node_pool)
    shape = replica_shape(m, pool)
    inst = next(it for it in pool.instances if it.name == shape.instance_type)
    tp, pp = shape.tensor_parallel_size, shape.pipeline_parallel_size
    cost = perf.step_cost(m.architecture, inst.gpu, tp, pp, prefill_rate=perf.prefill_tokens_per_s(m.architecture, inst.gpu, shape.gpus))
    return replica_load.replica_alone(m.architecture, inst, tp, pp), cost


def _mean_tpot(replica: replica_load.ReplicaModel, rps: float, prompt: int, output: int) -> float:
    rng = np.random.default_rng([0, 2])
    n = 600
    prompts = replica_load.jittered(rng, prompt, n).tolist()
    outputs = replica_load.jittered(rng, output, n).tolist()
    return float(np.mean(replica_load.open_loop(replica, rps, prompts, outputs, seed=0).tpot_s))


def test_an_aggregated_replica_at_its_sized_capacity_decodes_within_the_itl_target(
    stack_specs: dict[str, PlatformSpec],
) -> None:
    """Staging's 70B on A100 (aggregated): the rate sizing says one replica carries at full use keeps the mean TPOT
    within the ITL p99 target on the simulator's engine; the rate the unweighted sum of prefill and decode work claimed
    (1.6 times more) does not: every prefill chunk holds the decoding sequences."""
    spec = stack_specs["staging"]
    model = spec.models[0]
    ms = size_platform(spec).model(model.name)
    role = ms.role("aggregated")
    assert not role.derived_target  # backend hpa: the prompt-token rate at a utilisation
    full_rps = 1.0 / (role.replicas_per_rps * role.target_utilisation)
    replica, cost = _staging(spec)
    c = signal_coefficients(model, cost, ms.decode_batch_at_slo, ms.kv_capacity_tokens, ms.max_num_seqs)
    assert c.prefill_stall > 1.5
    prompt, output = int(model.workload.prompt_tokens.mean), int(model.workload.output_tokens.mean)
    itl = model.slo.itl_p99_s
    assert _mean_tpot(replica, full_rps, prompt, output) <= itl
    prefill = prompt * c.prefill_s(prompt)
    decode = output * c.decode_s_per_token
    unweighted_rps = full_rps * (c.prefill_stall * prefill + decode) / (prefill + decode)
    assert unweighted_rps > 1.5 * full_rps
    assert _mean_tpot(replica, unweighted_rps, prompt, output) > itl


def test_the_stall_is_the_budget_over_what_the_steps_fixed_part_leaves(stack_specs: dict[str, PlatformSpec]) -> None:
    spec = stack_specs["staging"]
    _, cost = _staging(spec)
    budget = spec.models[0].slo.itl_p99_s * ITL_HEADROOM
    fixed = cost.overhead_s + cost.weights_s
    assert prefill_stall(cost, budget) == round(budget / (budget - fixed), 4)
    assert prefill_stall(cost, fixed) == 1.0  # no step fits the budget: nothing to share


def test_only_aggregated_roles_weigh_their_prefill(stack_specs: dict[str, PlatformSpec]) -> None:
    """Prod's disaggregated 70B: a prefill pod never decodes and a decode pod never prefills (stall 1); its aggregated
    8B reads prefill work x stall + decode work on steady traffic."""
    spec = stack_specs["prod"]
    sized = size_platform(spec)
    big = sized.model("llama-70b-fp8")
    for r in big.roles:
        assert r.signals[0].coefficients.prefill_stall == 1.0  # type: ignore[attr-defined]
    small = sized.model("search-8b").role("aggregated")
    c = small.signals[0].coefficients  # type: ignore[attr-defined]
    assert c.prefill_stall > 1.0
    w = next(m for m in spec.models if m.name == "search-8b").workload
    rps, share = 3.0, 0.01
    steady = SteadySamples(rps, w.prompt_tokens.mean, w.output_tokens.mean, share)
    got = evaluate(aggregated_work((), c), steady)
    prefill = rps * w.prompt_tokens.mean * c.prefill_s(w.prompt_tokens.mean)
    decode = rps * w.output_tokens.mean * (c.decode_s_per_token + c.decode_s_per_kv_share * share)
    assert got is not None and abs(got - (prefill * c.prefill_stall + decode)) < 1e-9
