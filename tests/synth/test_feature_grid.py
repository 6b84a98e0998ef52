"""Property: every stack that validates also synthesizes, over a grid of the spec's features.

The features (issue 22, item 1): replica shape (aggregated, prefill/decode, multi-node, a small model on its own pool),
a front door or warm replicas, the KEDA or HPA backend, EFA, the cold-start choices (registry pull, SOCI, a
pre-pulled snapshot on Bottlerocket, the compile cache with node-cached Hugging Face weights) and one or two models on
one pool. The full product is 256 stacks, minutes of synth; every pair of feature values already meets in the
greedy pairwise cover below (deterministic, under 20 stacks), which is what broke before: a P/D model behind the door
validated and then its router and its door both claimed the Service ``<model>``.

A stack either validates (spec, then ``checked_sizing``) and then synthesizes without an exception, or is refused
with ``Problems``/``ValidationError``; nothing else. So that the property cannot hold vacuously, every feature value
must be seen in at least one stack that validated.
"""

from __future__ import annotations

import copy
import itertools
from collections.abc import Callable
from typing import Any

import pytest
from pydantic import ValidationError

from gpuscale.feasibility import checked_sizing
from gpuscale.problems import Problems
from gpuscale.spec.platform import PlatformSpec
from gpuscale.synth.render import synth_spec
from tests.specs import LLAMA_8B, model, multi_node_aggregated, pd_raw

Raw = dict[str, Any]


def _shape(name: str) -> Callable[[Raw], Raw]:
    def apply(raw: Raw) -> Raw:
        m = raw["models"][0]
        if name == "aggregated":
            m["serving"]["mode"] = "aggregated"
            m["autoscaling"] = {"aggregated": {"max_replicas": 4}}
        elif name == "multi-node":
            multi_node_aggregated(raw)
            m["autoscaling"]["aggregated"] = {"max_replicas": 2}
        elif name == "small-pool":  # an 8B model alone on an L40S pool
            raw["topology"]["gpu_pools"].append({"name": "l40s", "instance_types": ["g6e.xlarge"], "gpu_limit": 8})
            raw["teams"][0]["children"][0]["gpu_quota"] = 40
            raw["teams"][0]["children"].append({"name": "small", "gpu_quota": 8, "gpu_limit": 8})
            raw["teams"][0]["gpu_quota"] = raw["teams"][0]["gpu_limit"] = 72
            raw["topology"]["gpu_pools"][0]["gpu_limit"] = 64
            raw["models"] = [model("m8b", queue="small", pool="l40s")]
        return raw
    return apply


def _door(name: str) -> Callable[[Raw], Raw]:
    def apply(raw: Raw) -> Raw:
        if name == "scale-to-zero":  # the issue's case: standard SLO, zero on every role, a long request timeout
            for m in raw["models"]:
                m["slo"]["criticality"] = "standard"
                m["slo"]["request_timeout_s"] = 900
                roles = ["prefill", "decode"] if m["serving"]["mode"] == "disaggregated" else ["aggregated"]
                for role in roles:
                    m.setdefault("autoscaling", {}).setdefault(role, {})["min_replicas"] = 0
        return raw
    return apply


def _backend(name: str) -> Callable[[Raw], Raw]:
    def apply(raw: Raw) -> Raw:
        for m in raw["models"]:
            m.setdefault("autoscaling", {})["backend"] = name
        return raw
    return apply


def _efa(name: str) -> Callable[[Raw], Raw]:
    def apply(raw: Raw) -> Raw:
        if name == "efa":
            raw["topology"]["gpu_pools"][0]["efa"] = True
        return raw
    return apply


def _cold(name: str) -> Callable[[Raw], Raw]:
    def apply(raw: Raw) -> Raw:
        pools = raw["topology"]["gpu_pools"]
        if name == "soci-parallel":
            for p in pools:
                p["image_pull"] = "soci-parallel"
        elif name == "snapshot":
            for p in pools:
                p.update(ami_alias="bottlerocket@v1.20.4", image_pull="snapshot", image_snapshot_id="snap-0123456789abcdef0")
        elif name == "compile-cache":
            for m in raw["models"]:
                m["cold_start"] = {"engine_start": "compile-cache", "compile_cache_claim": "vllm-cache",
                                   "weights_cache": "node-nvme"}
                m["weights"] = {"uri": f"hf://meta-llama/{m['name']}"}
        return raw
    return apply


def _models(name: str) -> Callable[[Raw], Raw]:
    def apply(raw: Raw) -> Raw:
        if name == "two-per-pool":
            first = raw["models"][0]
            # 3: an aggregated 8B replica's prefill counts the decode steps it holds (sizing.prefill_stall), so 4 rps
            # of the fixture's mix needs 3 replicas on an L40S
            second = model("m8b-b", arch=copy.deepcopy(LLAMA_8B), queue=first["queue"], pool=first["node_pool"],
                           autoscaling={"aggregated": {"max_replicas": 3}})
            second["slo"] = copy.deepcopy(first["slo"])
            second["autoscaling"]["backend"] = first.get("autoscaling", {}).get("backend", "keda")
            if "cold_start" in first:
                second["cold_start"] = copy.deepcopy(first["cold_start"])
            if first["weights"]["uri"].startswith("hf://"):
                second["weights"] = {"uri": "hf://meta-llama/m8b-b"}
            if first["slo"]["criticality"] == "standard" and first["slo"]["request_timeout_s"] == 900:
                second["autoscaling"]["aggregated"]["min_replicas"] = 0
            raw["models"].append(second)
        return raw
    return apply


FEATURES: dict[str, tuple[str, ...]] = {
    "shape": ("prefill-decode", "aggregated", "multi-node", "small-pool"),
    "door": ("warm", "scale-to-zero"),
    "backend": ("keda", "hpa"),
    "efa": ("no-efa", "efa"),
    "cold_start": ("registry", "soci-parallel", "snapshot", "compile-cache"),
    "models": ("one-per-pool", "two-per-pool"),
}
# applied in this order: the shape picks the models, the door and backend set their scaling, the second model copies
_APPLY: dict[str, Callable[[str], Callable[[Raw], Raw]]] = {
    "shape": _shape, "door": _door, "backend": _backend, "efa": _efa, "cold_start": _cold, "models": _models,
}
_ORDER = ("shape", "door", "efa", "cold_start", "models", "backend")

Case = tuple[tuple[str, str], ...]


def refused_by_design(case: Case) -> bool:
    """Combinations the spec refuses whatever else the stack says: the HPA cannot scale to zero (``HPAScaleToZero``
    is off on EKS), so a door before an HPA-scaled model has nothing to wake."""
    c = dict(case)
    return c["door"] == "scale-to-zero" and c["backend"] == "hpa"


def pairwise_cover() -> list[Case]:
    """Greedy pairwise cover of FEATURES (less what is refused by design): each pick takes the first case (in product
    order) covering the most pairs not yet covered, so the list is the same on every run."""
    names = list(FEATURES)
    product = [c for values in itertools.product(*FEATURES.values())
               if not refused_by_design(c := tuple(zip(names, values, strict=True)))]
    uncovered = {pair for case in product for pair in itertools.combinations(case, 2)}
    cases: list[Case] = []
    while uncovered:
        best = max(product, key=lambda c: len(uncovered & set(itertools.combinations(c, 2))))
        cases.append(best)
        uncovered -= set(itertools.combinations(best, 2))
    return cases


ISSUE_CASE: Case = (("shape", "prefill-decode"), ("door", "scale-to-zero"), ("backend", "keda"), ("efa", "no-efa"),
                    ("cold_start", "registry"), ("models", "one-per-pool"))
CASES = [ISSUE_CASE, *[c for c in pairwise_cover() if c != ISSUE_CASE]]


def build(case: Case) -> Raw:
    raw = pd_raw()
    chosen = dict(case)
    for feature in _ORDER:
        raw = _APPLY[feature](chosen[feature])(raw)
    return raw


def _id(case: Case) -> str:
    return ",".join(v for _, v in case)


def test_the_cover_is_small_and_covers_every_pair() -> None:
    assert len(CASES) <= 24
    pairs = {p for case in CASES for p in itertools.combinations(case, 2)}
    names = list(FEATURES)
    for a, b in itertools.combinations(names, 2):
        for va, vb in itertools.product(FEATURES[a], FEATURES[b]):
            assert ((a, va), (b, vb)) in pairs or {(a, va), (b, vb)} == {("door", "scale-to-zero"), ("backend", "hpa")}


_validated: set[tuple[tuple[str, str], tuple[str, str]]] = set()


@pytest.mark.parametrize("case", CASES, ids=_id)
def test_a_stack_that_validates_also_synthesizes(case: Case) -> None:
    raw = build(case)
    try:
        spec = PlatformSpec.model_validate(raw)
        checked_sizing(spec)
    except (ValidationError, Problems):
        return  # refused with paths: what the CLI prints, exit 2
    synth = synth_spec(spec, stack="grid")  # must not raise: NameClash, KeyError... are the defects this finds
    kinds = {o["kind"] for _, o in synth.kubernetes_objects()}
    assert {"NodePool", "Deployment" if dict(case)["shape"] != "multi-node" else "LeaderWorkerSet"} <= kinds
    _validated.update(itertools.combinations(case, 2))


def test_the_issue_case_validates_and_synthesizes_a_door_before_the_pd_router() -> None:
    spec = PlatformSpec.model_validate(build(ISSUE_CASE))
    checked_sizing(spec)
    services = {o["metadata"]["name"] for _, o in synth_spec(spec, stack="grid").kubernetes_objects()
                if o["kind"] == "Service"}
    assert {"m70b", "m70b-pd"} <= services  # the door's entry point and the router behind it


def test_every_pair_of_features_synthesized_somewhere() -> None:
    """Runs after the grid (pytest keeps file order): every pair of feature values the spec allows was in a stack that
    validated and synthesized, so the property is not met by refusing everything."""
    if not _validated:
        pytest.skip("run with the grid cases (select the whole module)")
    allowed = {p for case in CASES for p in itertools.combinations(case, 2)}
    assert sorted(allowed - _validated) == []
