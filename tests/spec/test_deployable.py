"""Refusals that keep a spec deployable on a real AWS account (issue 12): the endpoint the program can reach, AMI releases
that exist for the cluster's Kubernetes version, P/D without pipeline parallelism, KV room for the ITL batch, replica
ceilings summed over every role sharing a bound, KV transfer time, topology levels the nodes carry."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from gpuscale import feasibility, perf, sizing
from gpuscale.manifests import kai_wiring, karpenter
from gpuscale.plan.context import build_context
from gpuscale.plan.evidence import Evidence
from gpuscale.plan.render import environment as plan_templates
from gpuscale.problems import Problems
from gpuscale.spec.platform import PlatformSpec
from gpuscale.stackfile import validate_config
from tests.specs import LLAMA_8B, environment, model, pd_raw, small_raw

QWEN_32B: dict[str, Any] = {
    "params_b": 32.8, "layers": 64, "attention_heads": 40, "kv_heads": 8, "head_dim": 128, "hidden_size": 5120,
    "vocab_size": 152064, "max_context_tokens": 16384,
}


def problems(raw: dict[str, Any]) -> list[str]:
    """Every refusal of ``raw`` as ``path: message`` lines ([] when it validates, sizes and cross-checks)."""
    try:
        feasibility.checked_sizing(PlatformSpec.model_validate(raw))
    except Problems as exc:
        return exc.lines()
    return []


# ---------------------------------------------------------------- endpoint access


def test_private_only_endpoint_on_a_new_vpc_is_refused_without_the_acknowledgement() -> None:
    env = {**environment(), "endpoint_public_access": False, "public_access_cidrs": []}
    with pytest.raises(Problems) as info:  # a stack creates the VPC and the cluster (gpuscale.platform_checks)
        validate_config(small_raw(environment=env), "t")
    (line,) = info.value.lines()
    assert line.startswith("gpuscale:environment.endpoint_public_access: the EKS endpoint would be private-only on a "
                           "VPC this same `pulumi up` creates")
    env["acknowledge_private_endpoint_runs_inside_vpc"] = True
    assert not validate_config(small_raw(environment=env), "t").environment.endpoint_public_access


def test_private_only_endpoint_on_existing_subnets_needs_no_acknowledgement() -> None:
    env = {**environment(), "endpoint_public_access": False, "public_access_cidrs": [],
           "networking": {"vpc_id": "vpc-0abc", "private_subnet_ids": ["subnet-1", "subnet-2"]}}
    assert PlatformSpec.model_validate(small_raw(environment=env)).environment.networking.vpc_id == "vpc-0abc"  # type: ignore[union-attr]


@pytest.mark.parametrize(("public", "cidrs", "match"), [
    (True, [], "needs public_access_cidrs"),
    (True, ["0.0.0.0/0"], "not 0.0.0.0/0"),
    (False, ["203.0.113.0/24"], "would be ignored"),
])
def test_public_endpoint_is_restricted_to_declared_cidrs(public: bool, cidrs: list[str], match: str) -> None:
    env = {**environment(), "endpoint_public_access": public, "public_access_cidrs": cidrs}
    with pytest.raises(ValidationError, match=match):
        PlatformSpec.model_validate(small_raw(environment=env))


# ---------------------------------------------------------------- AMI releases


@pytest.mark.parametrize(("alias", "match"), [
    ("al2023@v20251117", "is not an amazon-eks-ami release"),
    ("al2023@v20260724", "has no CHANGELOG entry"),
    ("al2023@v20260505", "built AMIs for Kubernetes 1.30, 1.31, 1.32, 1.33, 1.34, 1.35 but not 1.36"),
])
def test_gpu_pool_ami_must_be_a_release_carrying_the_cluster_version(alias: str, match: str) -> None:
    raw = small_raw()
    raw["topology"]["gpu_pools"][0]["ami_alias"] = alias
    (line,) = problems(raw)
    assert line.startswith("gpuscale:topology.gpu_pools[0].ami_alias:") and match in line


def test_an_older_release_is_fine_for_an_older_supported_version() -> None:
    raw = small_raw(environment={**environment(), "kubernetes_version": "1.35"})
    raw["topology"]["gpu_pools"][0]["ami_alias"] = "al2023@v20260505"
    assert problems(raw) == []


# ---------------------------------------------------------------- P/D and pipeline parallelism


def test_disaggregated_serving_with_pipeline_parallelism_is_refused_with_the_upstream_reason() -> None:
    raw = pd_raw()
    raw["models"][0]["parallelism"] = {"tensor_parallel_size": 8, "pipeline_parallel_size": 2}
    (line,) = problems(raw)
    assert line.startswith("gpuscale:models[0].parallelism.pipeline_parallel_size:")
    assert "NixlPushConnector consumer (decode) does not support pipeline_parallel_size > 1" in line
    assert "serving.mode: aggregated" in line
    raw["models"][0]["serving"]["mode"] = "aggregated"  # the explicit alternative
    raw["models"][0]["autoscaling"] = {"aggregated": {"max_replicas": 2}}
    assert problems(raw) == []


def test_sizing_never_picks_pipeline_parallelism_for_a_disaggregated_model() -> None:
    # 70B BF16 on 40 GB A100s needs more than one TP group's worth of memory: aggregated sizing takes PP 2
    arch = {**LLAMA_8B, "params_b": 70.55, "layers": 80, "attention_heads": 64, "hidden_size": 8192,
            "max_context_tokens": 8192}
    pool = {"name": "a100", "instance_types": ["p4d.24xlarge"], "gpu_limit": 64}
    for mode in ("aggregated", "disaggregated"):
        raw = small_raw(topology={"zones": ["us-east-1a"], "gpu_pools": [pool]},
                        teams=[{"name": "d", "gpu_quota": 64, "children": [{"name": "team", "gpu_quota": 64}]}],
                        models=[model(arch=arch, pool="a100", mode=mode)])
        spec = PlatformSpec.model_validate(raw)
        try:
            shape = sizing.replica_shape(spec.models[0], spec.topology.pool("a100"))
        except sizing.SizingError as exc:
            assert mode == "disaggregated" and "PP 1 (disaggregated)" in str(exc)
            continue
        assert mode == "aggregated" or shape.pipeline_parallel_size == 1


# ---------------------------------------------------------------- KV room for the decode batch


def _a100_40(parallelism: dict[str, Any] | None = None) -> dict[str, Any]:
    return small_raw(
        topology={"zones": ["us-east-1a"], "gpu_pools": [{"name": "a100", "instance_types": ["p4d.24xlarge"], "gpu_limit": 64}]},
        teams=[{"name": "d", "gpu_quota": 64, "children": [{"name": "team", "gpu_quota": 64}]}],
        models=[model(arch=QWEN_32B, pool="a100", **({"parallelism": parallelism} if parallelism else {}))],
    )


def test_explicit_tp_whose_kv_holds_less_than_the_itl_batch_is_refused_naming_a_tp_that_fits() -> None:
    (line,) = problems(_a100_40({"tensor_parallel_size": 2}))
    assert line.startswith("gpuscale:models[0].parallelism:")
    assert "less than half the" in line and "decode batch the ITL target (0.05 s) needs" in line
    assert "TP 4 x PP 1 would fit" in line


def test_sizing_picks_a_larger_tp_and_says_why() -> None:
    spec = PlatformSpec.model_validate(_a100_40())
    shape = sizing.replica_shape(spec.models[0], spec.topology.pool("a100"))
    assert shape.tensor_parallel_size == 4
    assert "TP 2 x PP 1 leaves KV room for" in shape.why and "decode batch the ITL target" in shape.why
    inst = spec.topology.pool("a100").instances[0]
    kv = sizing.kv_capacity_tokens(spec.models[0], inst, 4, 1)
    need = sizing.itl_decode_batch(spec.models[0], inst, 4, 1)
    assert sizing.kv_decode_batch(spec.models[0], kv) >= need * sizing.KV_BATCH_FLOOR_SHARE


# ---------------------------------------------------------------- replica ceilings vs shared bounds


def test_explicit_ceilings_are_summed_over_roles_and_name_the_binding_queue() -> None:
    # prefill 9 + decode 9 at 4 GPUs = 72 GPUs in a leaf with quota 40 (the prod numbers); each alone fits 40
    raw = pd_raw(teams=[{"name": "dept", "gpu_quota": 56, "gpu_limit": 64, "children": [
        {"name": "chat", "gpu_quota": 40, "gpu_limit": 48},
        {"name": "batch", "gpu_quota": 16, "gpu_limit": 64, "preemptible": True},
    ]}])
    raw["models"][0]["parallelism"] = {"tensor_parallel_size": 4}
    raw["models"][0]["autoscaling"] = {"prefill": {"max_replicas": 9}, "decode": {"max_replicas": 9}}
    lines = problems(raw)
    assert lines[0] == (
        "gpuscale:models[0].autoscaling.prefill.max_replicas: max_replicas m70b/prefill 9 x 4 + m70b/decode 9 x 4 = 72 "
        "GPUs exceed queue chat gpu_quota 40 (non-preemptible workloads run in quota only); replicas above it stay "
        "Pending while Karpenter buys nodes for them. Lower max_replicas (or leave them unset: sizing shares the bound "
        "by peak demand), or raise the bound"
    )
    assert any("exceed node pool h100 gpu_limit 64" in line for line in lines)


def test_models_sharing_an_ancestor_are_summed_against_its_quota() -> None:
    # two leaves of 8 each fit their own quotas, but their parent guarantees 12
    raw = small_raw(
        teams=[{"name": "dept", "gpu_quota": 12, "gpu_limit": 16, "children": [
            {"name": "team", "gpu_quota": 6}, {"name": "other", "gpu_quota": 6}]}],
        models=[model("a", autoscaling={"aggregated": {"max_replicas": 6}}),
                model("b", queue="other", autoscaling={"aggregated": {"max_replicas": 6}})],
    )
    raw["topology"]["gpu_pools"][0]["gpu_limit"] = 16
    assert problems(raw) == []
    raw["models"][1]["autoscaling"]["aggregated"]["max_replicas"] = 7
    leaf, parent = problems(raw)
    assert leaf.startswith("gpuscale:models[1].autoscaling.aggregated.max_replicas: max_replicas b/aggregated 7 x 1 = 7 "
                           "GPUs exceed queue other gpu_quota 6")
    assert "a/aggregated 6 x 1 + b/aggregated 7 x 1 = 13 GPUs exceed queue dept gpu_quota 12" in parent


def test_derived_ceilings_share_every_bound_and_always_pass_the_cross_check() -> None:
    spec = PlatformSpec.model_validate(pd_raw(models=[model(
        "m70b", arch=pd_raw()["models"][0]["architecture"], queue="chat", pool="h100", mode="disaggregated",
        criticality="critical", workload={"base_rps": 10, "peak_rps": 40, "prompt_tokens": {"mean": 1500, "p99": 8000},
                                          "output_tokens": {"mean": 250, "p99": 1000}},
    )]))
    sized = feasibility.checked_sizing(spec)  # raises if the derived ceilings broke a bound
    ms = sized.model("m70b")
    used = sum(r.max_replicas for r in ms.roles) * ms.shape.gpus
    assert used <= 48  # chat's quota: the two roles share it, neither gets all of it
    assert all("GPUs of queue chat gpu_quota 48" in r.max_replicas_why for r in ms.roles)
    assert all(r.max_replicas >= r.min_replicas == sizing.CRITICAL_MIN_REPLICAS for r in ms.roles)


def test_every_bound_lists_the_roles_that_count_against_it() -> None:
    spec = PlatformSpec.model_validate(pd_raw())
    bounds = {(b.kind, b.name): b.roles for b in sizing.gpu_bounds(spec)}
    both = [("m70b", "prefill"), ("m70b", "decode")]
    assert bounds[("gpu_quota", "chat")] == both and bounds[("gpu_quota", "dept")] == both
    assert bounds[("pool_gpu_limit", "h100")] == both
    assert ("gpu_limit", "chat") not in bounds  # only non-preemptible roles below: the quota binds first


# ---------------------------------------------------------------- KV transfer over the network


def test_pd_whose_kv_transfer_eats_the_ttft_budget_is_refused() -> None:
    # an 8B model's 4000-token p99 prompt is 524 MB of KV: 1.7 s over g6e.xlarge's 2.5 Gbit/s, of a 2 s TTFT budget
    raw = small_raw(models=[model(mode="disaggregated")])
    lines = problems(raw)
    assert any(line.startswith("gpuscale:models[0].serving.mode: disaggregated m8b: moving the KV cache of a p99 prompt")
               and "more than 25% of the 2 s TTFT p99 budget" in line for line in lines)
    # the rate it names is the replica's share perf gives the simulator too: replica GPUs / node GPUs x the NIC
    spec = PlatformSpec.model_validate(raw)
    pool = spec.topology.gpu_pools[0]
    shape = sizing.replica_shape(spec.models[0], pool)
    inst = next(it for it in pool.instances if it.name == shape.instance_type)
    gbps = round(perf.kv_link_bytes_per_s(inst.network_gbps, inst.gpus_per_node, shape.gpus) * 8 / 1e9, 1)
    assert gbps == round(inst.network_gbps * shape.gpus / inst.gpus_per_node, 1)
    assert any(f"at line rate ({gbps:g} Gbit/s: the replica's {shape.gpus} GPU(s) x {inst.name}'s "
               f"{inst.network_gbps:g} Gbit/s per {inst.gpus_per_node} GPUs)" in line for line in lines)


def test_pd_on_efa_class_networking_keeps_the_transfer_small() -> None:
    spec = PlatformSpec.model_validate(pd_raw())
    ms = feasibility.checked_sizing(spec).model("m70b")
    assert 0 < ms.kv_transfer_p99_s <= sizing.KV_TRANSFER_TTFT_SHARE * spec.models[0].slo.ttft_p99_s


# ---------------------------------------------------------------- topology levels the nodes carry


def _pools(*types: list[str]) -> PlatformSpec:
    pools = [{"name": f"p{i}", "instance_types": t, "gpu_limit": 8} for i, t in enumerate(types)]
    return PlatformSpec.model_validate(small_raw(
        topology={"zones": ["us-east-1a"], "gpu_pools": pools},
        models=[model(pool="p0")],
    ))


def test_pools_without_network_layer_labels_never_name_a_topology_with_them() -> None:
    spec = _pools(["g6e.xlarge"], ["g6.xlarge"], ["g5.xlarge"])
    assert kai_wiring.topology_name(spec, "p0") == "gpuscale"
    assert [lv.node_label for lv in spec.topology.pool_levels("p1")] == ["topology.kubernetes.io/zone", "kubernetes.io/hostname"]
    assert kai_wiring.topology_name(spec, "p1") == kai_wiring.topology_name(spec, "p2") == "gpuscale-0-network-layers"
    assert kai_wiring.finest_network_level(spec, "p1") is None


def test_a_mixed_pool_uses_the_layers_all_of_its_types_carry() -> None:
    # p5.48xlarge carries three network layers, p5.4xlarge none: the pool's Topology keeps none of them
    spec = _pools(["p5.48xlarge", "p5.4xlarge"], ["g6e.xlarge", "g6e.2xlarge"])
    assert spec.topology.pool_network_layers("p0") == {"p5.48xlarge": 3, "p5.4xlarge": 0}
    assert kai_wiring.topology_name(spec, "p0") == "gpuscale-0-network-layers"
    # and says which: the synth warning and the plan name each type's layers and what the Topology keeps
    (warning,) = karpenter.network_layer_warnings(spec.topology.pool("p0"))
    assert "(p5.48xlarge: 3, p5.4xlarge: 0)" in warning and "keeps the 0 layer(s)" in warning
    assert karpenter.network_layer_warnings(spec.topology.pool("p1")) == []
    rows = {p.name: p for p in build_context("t", spec, sizing.size_platform(spec)).pools}
    assert rows["p0"].network_layers_note == warning and rows["p1"].network_layers_note == ""
    layer1 = plan_templates().get_template("plan_layer1.md.j2").render(
        c=build_context("t", spec, sizing.size_platform(spec)), e=Evidence(node_manifests=[], simulations=[]))
    assert layer1.count(warning) == 1


def test_wiring_names_the_pool_s_topology() -> None:
    raw = small_raw(topology={"zones": ["us-east-1a"], "gpu_pools": [
        {"name": "l4", "instance_types": ["g6.xlarge", "g6.12xlarge"], "gpu_limit": 8}]}, models=[model(pool="l4")])
    spec = PlatformSpec.model_validate(raw)
    shape = sizing.replica_shape(spec.models[0], spec.topology.pool("l4"))
    wiring = kai_wiring.kai_pod_wiring(spec, spec.models[0], "aggregated", shape)
    assert wiring.workload_annotations["kai.scheduler/topology"] == "gpuscale-0-network-layers"
