"""Every emitted value an upstream validator bounds, emitted from the extremes of the spec's ranges, within its bound.

Stacks at the ends of the ranges users may write (request timeouts of a day and of seconds, the longest and shortest
polling, stabilisation and idle windows, a cold start of a day, names as long as the spec allows) are validated and
synthesized; then every field ``gpuscale.upstream_bounds.EMITTED`` lists, every label, every Helm release name and
every duration in the front door's Envoy bootstrap is checked against its upstream bound. Before the cap, a
7,200 s request timeout emitted ``message_timeout: 7225s`` and Envoy refused its bootstrap.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from gpuscale import upstream_bounds as ub
from gpuscale.feasibility import checked_sizing
from gpuscale.manifests import autoscaling
from gpuscale.spec.base import INT32_MAX
from gpuscale.spec.platform import PlatformSpec
from gpuscale.synth.render import SynthResult, synth_spec
from tests.specs import model, pd_raw

LONG_NAME = "m" + "x" * 39  # the spec's 40-character limit on names
LONG_NAMESPACE = "n" * 63


def _door_everywhere(raw: dict[str, Any], **slo: Any) -> dict[str, Any]:
    m = raw["models"][0]
    m["slo"].update(criticality="standard", **slo)
    for role in ("prefill", "decode"):
        m["autoscaling"][role]["min_replicas"] = 0
    return raw


def long_windows() -> dict[str, Any]:
    """The longest request timeout, idle window, poll and windows; a second model (HPA) with the longest cooldown."""
    raw = _door_everywhere(pd_raw(), request_timeout_s=86_400)
    m = raw["models"][0]
    m["front_door"] = {"idle_window_s": 86_400, "poll_s": 60}
    for role in ("prefill", "decode"):
        m["autoscaling"][role].update(polling_interval_s=3600, scale_down_stabilization_s=3600)
    other = model("m8b", queue="chat", pool="h100", autoscaling={
        "backend": "keda", "aggregated": {"min_replicas": 0, "cooldown_s": INT32_MAX, "polling_interval_s": 3600,
                                          "wake_schedule": {"start": "0 8 * * 1-5", "end": "0 18 * * 1-5"}}})
    other["front_door"] = {"enabled": False}
    raw["models"].append(other)
    return raw


def short_windows() -> dict[str, Any]:
    """The shortest request timeout that still meets the first answer, windows of zero, polling every second."""
    raw = _door_everywhere(pd_raw(), request_timeout_s=900, ttft_p99_s=0.1)
    m = raw["models"][0]
    m["front_door"] = {"idle_window_s": 60, "poll_s": 1}
    m["workload"]["peak_rps"] = 1.4  # what 4 prefill replicas carry at a 0.1 s TTFT (1.6 needs 5)
    for role in ("prefill", "decode"):
        m["autoscaling"][role].update(polling_interval_s=1, scale_down_stabilization_s=0)
    return raw


def slow_cold_start() -> dict[str, Any]:
    """A warm model whose measured cold start is two hours: the derived scale-down window (longer than a cold start)
    must stay within the HPA's."""
    raw = pd_raw()
    raw["topology"]["provisioning"] = {"image_pull_s": 3600, "engine_init_s": 3600}
    raw["topology"]["gpu_pools"][0]["consolidate_after"] = "3h"  # longer than the cold start, as checks require
    m = raw["models"][0]
    m["autoscaling"]["backend"] = "hpa"
    return raw


def long_names() -> dict[str, Any]:
    raw = _door_everywhere(pd_raw(), request_timeout_s=7200)
    raw["topology"]["gpu_pools"][0]["name"] = LONG_NAME[:-1] + "p"
    m = raw["models"][0]
    m.update(name=LONG_NAME, node_pool=LONG_NAME[:-1] + "p")
    m["serving"]["namespace"] = LONG_NAMESPACE
    return raw


STACKS = {"long-windows": long_windows, "short-windows": short_windows, "slow-cold-start": slow_cold_start,
          "long-names": long_names}


@pytest.fixture(scope="module", params=list(STACKS))
def synth(request: pytest.FixtureRequest) -> SynthResult:
    spec = PlatformSpec.model_validate(STACKS[request.param]())
    checked_sizing(spec)  # the extremes are valid stacks: each must be emitted within every bound
    return synth_spec(spec, stack=request.param)


def values_at(obj: Any, path: str) -> Iterator[Any]:
    """Every value at ``path`` (dots; ``name[]`` for each item of a list); nothing where a key is absent."""
    head, _, rest = path.partition(".")
    each = head.endswith("[]")
    key = head.removesuffix("[]")
    if not isinstance(obj, dict) or key not in obj:
        return
    items = obj[key] if each else [obj[key]]
    for item in items if isinstance(items, list) else []:
        if rest:
            yield from values_at(item, rest)
        else:
            yield item


def _labels(obj: Any) -> Iterator[dict[str, str]]:
    if isinstance(obj, dict):
        for k, v in obj.items():
            if k in ("labels", "matchLabels") and isinstance(v, dict):
                yield v
            else:
                yield from _labels(v)
    elif isinstance(obj, list):
        for v in obj:
            yield from _labels(v)


_DURATION = re.compile(r"(\d+(?:\.\d+)?)s")
_EXT_PROC_LIMITED = ("message_timeout", "max_message_timeout")


def envoy_durations(node: Any, key: str = "") -> Iterator[tuple[str, float]]:
    if isinstance(node, dict):
        for k, v in node.items():
            yield from envoy_durations(v, k)
    elif isinstance(node, list):
        for v in node:
            yield from envoy_durations(v, key)
    elif isinstance(node, str) and (m := _DURATION.fullmatch(node)):
        yield key, float(m.group(1))


def test_every_bounded_kubernetes_field_is_within_its_bound(synth: SynthResult) -> None:
    problems: list[str] = []
    seen: set[tuple[str, str]] = set()
    for key, obj in synth.kubernetes_objects():
        for kind, path, bound in ub.EMITTED:
            if kind not in (obj.get("kind"), "*"):
                continue
            for value in values_at(obj, path):
                seen.add((kind, path))
                if isinstance(bound, ub.PatternBound):
                    why = bound.problem(value)
                else:
                    why = bound.problem(len(value) if path.endswith(".name") else value)
                if why:
                    problems.append(f"{key} {path}: {why}")
        for labels in _labels(obj):
            for name, value in labels.items():
                for why in (ub.LABEL_NAME_CHARS.problem(len(name.rpartition("/")[2])),
                            ub.LABEL_VALUE_CHARS.problem(len(value))):
                    if why:
                        problems.append(f"{key} label {name}: {why}")
    assert problems == []
    assert ("ScaledObject", "spec.pollingInterval") in seen or ("HorizontalPodAutoscaler",
                                                                 "spec.behavior.scaleDown.stabilizationWindowSeconds") in seen
    assert ("NodePool", "spec.disruption.consolidateAfter") in seen


def _door_envoys(synth: SynthResult) -> list[tuple[str, dict[str, Any]]]:
    out = []
    for r in synth.resources:
        if r["type"].startswith("kubernetes:helm.sh/") and "router" in (r["inputs"].get("values") or {}):
            envoy = r["inputs"]["values"]["router"]["proxy"]["configMap"]["data"]["envoy.yaml"]
            out.append((r["key"], yaml.safe_load(envoy)))
    return out


def test_helm_release_names_fit(synth: SynthResult) -> None:
    names = [r["inputs"]["name"] for r in synth.resources if r["type"].startswith("kubernetes:helm.sh/")]
    assert names and [n for n in names if ub.HELM_RELEASE_NAME_CHARS.problem(len(n))] == []


def test_every_envoy_duration_is_within_envoys_bounds(synth: SynthResult) -> None:
    envoys = _door_envoys(synth)
    if synth.stack == "slow-cold-start":
        assert envoys == []  # a warm model has no door
        return
    assert envoys
    problems = []
    for key, bootstrap in envoys:
        durations = list(envoy_durations(bootstrap))
        assert any(k == "message_timeout" for k, _ in durations)
        for field, seconds in durations:
            bound = ub.ENVOY_EXT_PROC_MESSAGE_TIMEOUT_S if field in _EXT_PROC_LIMITED else ub.PROTOBUF_DURATION_S
            if why := bound.problem(seconds):
                problems.append(f"{key} {field}: {why}")
    assert problems == []


def test_a_day_long_timeout_holds_at_most_what_envoy_allows() -> None:
    spec = PlatformSpec.model_validate(long_windows())
    door = checked_sizing(spec).model("m70b").front_door
    assert door is not None
    assert door.hold_limit_s == ub.ENVOY_EXT_PROC_MESSAGE_TIMEOUT_S.high - 30  # 3570 s, not 86,398 s


def test_the_keda_name_limit_is_the_tables() -> None:
    assert ub.KEDA_SCALED_OBJECT_NAME_CHARS.high == autoscaling.KEDA_NAME_LIMIT
