"""A role's optional autoscaling settings are resolved once, on the spec; sizing and the validators read the result."""

from __future__ import annotations

from gpuscale.sizing import size_platform
from gpuscale.spec.model import DEFAULT_ACTIVATION_THRESHOLD, DEFAULT_BURST_MODE, AutoscalingSpec
from gpuscale.spec.platform import PlatformSpec
from tests.specs import small_raw


def test_unset_settings_take_the_defaults_and_the_guard_follows_the_backend() -> None:
    keda, hpa = AutoscalingSpec(), AutoscalingSpec(backend="hpa")
    assert keda.resolved_burst_mode("aggregated") is DEFAULT_BURST_MODE is True
    assert keda.resolved_activation_threshold("aggregated") == DEFAULT_ACTIVATION_THRESHOLD == 0.0
    assert keda.resolved_slo_guard("prefill") is True and hpa.resolved_slo_guard("prefill") is False


def test_written_settings_win_over_the_defaults() -> None:
    a = AutoscalingSpec.model_validate({"decode": {"burst_mode": False, "slo_guard": False, "activation_threshold": 3}})
    assert (a.resolved_burst_mode("decode"), a.resolved_slo_guard("decode"), a.resolved_activation_threshold("decode")) \
        == (False, False, 3.0)
    assert a.resolved_burst_mode("prefill") is True  # another role keeps its own default


def test_sizing_reads_the_resolved_values() -> None:
    raw = small_raw()
    raw["models"][0]["autoscaling"] = {"aggregated": {"burst_mode": False, "activation_threshold": 2}}
    spec = PlatformSpec.model_validate(raw)
    rs = size_platform(spec).models[0].role("aggregated")
    a = spec.models[0].autoscaling
    assert (rs.burst_mode, rs.activation_threshold) == (a.resolved_burst_mode("aggregated"),
                                                        a.resolved_activation_threshold("aggregated")) == (False, 2.0)
    assert any(s.purpose == "guard" for s in rs.signals) is a.resolved_slo_guard("aggregated") is True
