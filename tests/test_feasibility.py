"""The feasibility pipeline names the model sizing refused by the model it sized, not by searching the message."""

from __future__ import annotations

import pytest

from gpuscale import feasibility, sizing
from gpuscale.problems import Problems
from gpuscale.spec.model import ModelDeployment
from gpuscale.spec.platform import PlatformSpec


def test_a_sizing_error_is_attributed_to_the_model_that_raised_it(
    prod_spec: PlatformSpec, monkeypatch: pytest.MonkeyPatch,
) -> None:
    real = sizing._size_alone
    second = prod_spec.models[1].name

    def refuse_second(spec: PlatformSpec, model: ModelDeployment) -> sizing.ModelSizing:
        if model.name == second:
            # a message naming another model: the old text search would have blamed models[0]
            raise sizing.SizingError(f"model {prod_spec.models[0].name}: cannot be placed", "serving.mode")
        return real(spec, model)

    monkeypatch.setattr(sizing, "_size_alone", refuse_second)
    with pytest.raises(Problems) as info:
        feasibility._checked_sizing(prod_spec)
    [problem] = info.value.problems
    assert problem.path == "models[1].serving.mode"


def test_the_refusal_of_a_peak_beyond_the_limits_names_the_rate_the_limits_carry_by_solving_the_signal(raw_stack) -> None:  # type: ignore[no-untyped-def]
    import math
    import re

    from gpuscale.stackfile import validate_config

    raw = raw_stack("prod")
    # long prompts at a ceiling of two prefill replicas: the queueing headroom is a large share of what they hold
    raw["models"][0]["autoscaling"].setdefault("prefill", {})["max_replicas"] = 2
    w = raw["models"][0]["workload"]
    w.update(prompt_tokens={"mean": 8000, "p99": 30000}, peak_rps=4, base_rps=min(w["base_rps"], 4))
    spec = PlatformSpec.model_validate(raw)
    with pytest.raises(Problems) as exc:
        feasibility.checked_sizing(spec)
    msg = next(p.message for p in exc.value.problems if "llama-70b-fp8/prefill" in p.message)
    found = re.search(r"can carry about ([0-9.,]+) rps", msg)
    assert found is not None, msg
    carried = float(found.group(1).replace(",", ""))
    ms = sizing.size_platform(spec).model("llama-70b-fp8")
    rs = ms.role("prefill")
    m = spec.models[0]
    assert rs.derived_target and rs.replicas_at_peak > rs.max_replicas

    def needed(rps: float) -> int:
        return math.ceil(sizing.role_replicas(m, ms, rs, rps) - 1e-9)

    # the stated rate (rounded down to 3 significant digits) fits the ceiling and a little more does not
    assert needed(carried) <= rs.max_replicas < needed(carried * 1.01)
    # the queueing headroom does not grow in proportion to load: scaling the peak linearly (4 x 2 / 4 = 2 rps) would
    # promise far more than the two replicas carry
    linear = m.workload.peak_rps * rs.max_replicas / rs.replicas_at_peak
    assert linear > 1.5 * carried, (linear, carried)
    # the same spec with the stated rate as its peak is accepted
    raw["models"][0]["workload"].update(peak_rps=carried, base_rps=carried)
    validate_config(raw, "t")
