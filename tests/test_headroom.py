"""Spare nodes sized from the SLO's workload (``gpuscale.headroom``): N from the burst within the node wait, bounded by
the role's ceiling, priced all day, emitted only where a replica on a spare node serves before the burst is over and
only with Karpenter's gate; refusals at the YAML path to change."""

from __future__ import annotations

import math
from typing import Any

import pytest
from pydantic import ValidationError

from gpuscale import feasibility, headroom
from gpuscale.problems import Problems
from gpuscale.sizing import size_platform
from gpuscale.spec.catalogue import CATALOGUE
from gpuscale.spec.platform import PlatformSpec
from gpuscale.stackfile import format_errors
from tests.specs import pd_raw


def bursty(mode: str = "capacity-buffer", *, duration_s: float = 600, gate: bool = True, **head: Any) -> dict[str, Any]:
    raw = pd_raw()
    m = raw["models"][0]
    m["workload"].update(peak_rps=20, burst={"multiplier": 2.0, "duration_s": duration_s, "per_hour": 2})
    m["autoscaling"] = {"prefill": {"max_replicas": 6}, "decode": {"max_replicas": 4}}
    m["headroom"] = {"mode": mode, **head}
    raw["topology"]["provisioning"] = {"capacity_buffer_gate": gate}
    return raw


def test_n_is_the_replicas_at_full_utilisation_for_the_burst_within_the_node_wait_less_the_peak_replicas() -> None:
    spec = PlatformSpec.model_validate(bursty())
    ms = size_platform(spec).models[0]
    # decode: at 20 rps the 3 peak prefill replicas (rounded up) already carry the burst; decode's 1 does not
    decode = ms.role("decode")
    h = decode.headroom
    assert h is not None
    wait = headroom.KARPENTER_BATCH_MAX_S + ms.cold_start.node_s + ms.cold_start.gpu_ready_s
    top = 2.0 * 20
    rate = top + headroom.BURST_QUANTILE_Z * math.sqrt(top / wait)
    needed = math.ceil(decode.replicas_per_rps * decode.load_share * rate - 1e-9)
    assert (h.node_wait_s, h.burst_rps, h.needed_replicas) == (round(wait, 1), round(rate, 2), needed)
    assert h.replicas == min(needed - decode.replicas_at_peak, decode.max_replicas - decode.replicas_at_peak) >= 1
    assert h.pods == h.replicas * ms.shape.pods and h.gpus == h.replicas * ms.shape.gpus
    inst = CATALOGUE[ms.shape.instance_type]
    assert h.gpu_hours_per_day == h.gpus * 24 and h.usd_per_day == round(h.gpus * 24 * inst.usd_per_gpu_hour, 2)
    assert h.pays and h.emitted  # a replica on a spare node (image, weights, engine) serves inside the 600 s burst
    assert h.load_s == round(ms.cold_start.image_pull_s + ms.cold_start.weights_s + ms.cold_start.engine_init_s, 1)


def test_bursts_shorter_than_a_replicas_load_do_not_pay_for_spare_nodes() -> None:
    spec = PlatformSpec.model_validate(bursty(duration_s=120))
    # the derived targets hold the replicas the SLO needs, not a burst-discounted utilisation: prefill is a replica short
    # of the burst at full use, but a replica on a spare node would arrive after the 120 s burst, so none is emitted
    roles = size_platform(spec).models[0].roles
    for r in roles:
        assert r.derived_target and r.headroom is not None and not r.headroom.emitted
        assert r.headroom.replicas == 0 or "after the burst" in r.headroom.why
    assert any(r.headroom is not None and r.headroom.replicas > 0 for r in roles)
    # at the undiscounted target a replica is short, but it would arrive after the burst
    h = headroom.size_headroom(
        mode="capacity-buffer", role="prefill", workload=spec.models[0].workload,
        cold=size_platform(spec).models[0].cold_start, replicas_per_rps=1.0, target_utilisation=0.7,
        replicas_at_peak=14, max_replicas=20, gpus_per_replica=2, pods_per_replica=1, gpus_per_node=8,
        usd_per_gpu_hour=1.0,
    )
    assert h.replicas > 0 and not h.pays and not h.emitted and "after the burst" in h.why


def test_no_spare_node_beyond_the_ceiling() -> None:
    raw = bursty()
    raw["models"][0]["autoscaling"]["decode"]["max_replicas"] = 1  # the peak replica count: no room to add one
    h = size_platform(PlatformSpec.model_validate(raw)).models[0].role("decode").headroom
    assert h is not None and h.replicas == 0 and not h.emitted and "max_replicas" in h.why


def test_mode_none_sizes_but_emits_nothing() -> None:
    h = size_platform(PlatformSpec.model_validate(bursty("none"))).models[0].role("decode").headroom
    assert h is not None and h.replicas >= 1 and h.pays and not h.emitted


@pytest.mark.parametrize(("gate", "provisioner", "fix"), [
    (False, "karpenter", "capacity_buffer_gate: true"),
    (True, "cluster-autoscaler", "node_provisioner: karpenter"),
])
def test_a_capacity_buffer_without_the_gate_or_karpenter_is_refused_at_the_mode(gate: bool, provisioner: str, fix: str) -> None:
    raw = bursty(gate=gate)
    raw["topology"]["provisioning"]["node_provisioner"] = provisioner
    with pytest.raises(ValidationError) as info:
        PlatformSpec.model_validate(raw)
    [problem] = format_errors(info.value)
    assert problem.path == "models[0].headroom.mode" and fix in problem.message and "headroom.mode: none" in problem.message


def test_no_headroom_needs_no_gate() -> None:
    PlatformSpec.model_validate(bursty("none", gate=False))


def test_headroom_above_the_cost_cap_is_refused_at_the_cap() -> None:
    with pytest.raises(Problems) as info:
        feasibility.checked_sizing(PlatformSpec.model_validate(bursty(max_usd_per_day=100)))
    [problem] = [p for p in info.value.problems if "headroom" in p.path]
    assert problem.path == "models[0].headroom.max_usd_per_day" and "$330" in problem.message
    feasibility.checked_sizing(PlatformSpec.model_validate(bursty(max_usd_per_day=400)))


def test_a_derived_target_role_counts_its_spare_nodes_at_its_own_target_not_the_unused_utilisation() -> None:
    # replicas_per_rps of a role on the SLO-derived target is measured against that target (one replica of need within
    # the HPA's tolerance), so the replicas at full use are replicas_per_rps x TARGET_REPLICAS: reading the unused
    # target_utilisation (0.7 here) instead undercounts them
    from gpuscale.signals import slo_target

    ms = size_platform(PlatformSpec.model_validate(bursty())).models[0]
    wait = headroom.KARPENTER_BATCH_MAX_S + ms.cold_start.node_s + ms.cold_start.gpu_ready_s
    rate = 40.0 + headroom.BURST_QUANTILE_Z * math.sqrt(40.0 / wait)
    for r in ms.roles:
        assert r.derived_target and r.load_share == slo_target.TARGET_REPLICAS != r.target_utilisation
        h = r.headroom
        assert h is not None
        assert h.needed_replicas == math.ceil(r.replicas_per_rps * slo_target.TARGET_REPLICAS * rate - 1e-9)
        assert h.needed_replicas > math.ceil(r.replicas_per_rps * r.target_utilisation * rate - 1e-9) - 1
    # the rationale names the target the replicas are held at (at a 1.1x burst the peak replicas carry it)
    raw = bursty()
    raw["models"][0]["workload"]["burst"]["multiplier"] = 1.1
    mild = size_platform(PlatformSpec.model_validate(raw)).models[0].role("prefill")
    assert mild.headroom is not None and mild.headroom.replicas == 0
    assert f"at the SLO-derived target ({slo_target.TARGET_REPLICAS:g} of a replica) carry" in mild.headroom.why
    assert f"target {mild.target_utilisation:g}" not in mild.headroom.why
