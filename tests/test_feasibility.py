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
