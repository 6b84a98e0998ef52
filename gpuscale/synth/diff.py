"""Compare two synth outputs: what a change adds, removes and alters, with what it does to GPU nodes first.

Resources are matched by key (``type::name``), so two stacks of the same program compare cleanly. Field paths are
JSON pointers (RFC 6901) into the resource's inputs on the side that holds the value: the head for added and
changed fields, the base for removed ones. List items that carry a ``name`` (containers, env, ports) or a ``key``
(requirements, taints) are matched by it, other lists by longest common subsequence, so inserting one container
argument reads as one added item rather than every later index changing.

The summary ranks what a reviewer must not miss:

- **GPU nodes**: Karpenter drift. Every EC2NodeClass spec field and every NodePool ``spec.template`` field is
  hashed; a change marks the nodes launched from it drifted and Karpenter replaces them (each GPU node replaced is
  a model cold start), paced only by the NodePool disruption budgets; the summary says how many nodes roll at a time, in
  which drift window, and whether a ``terminationGracePeriod`` lets drift force-evict serving pods. Requirements, subnets, security groups and
  AMI selectors are resolved: only nodes that no longer match are replaced. ``spec.disruption`` changes replace
  nothing but change what Karpenter may evict; ``spec.limits`` changes the ceiling. (Karpenter
  docs/concepts/disruption.md, "Drift" and "Behavioral Fields".)
- **Autoscaling**: ScaledObject triggers, thresholds, min/max, behaviour; HPA metrics, min/max, behaviour.
- **Replacements**: a new parent (the URN changes: Pulumi deletes and recreates without an alias), a new
  Kubernetes name or namespace, a new workload selector (immutable).
- **Rollouts**: pod-template changes of workloads; on GPU workloads every pod restarts with a cold start.
- **Upgrades**: Helm chart versions.
"""

from __future__ import annotations

import difflib
import json
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from gpuscale import labels
from gpuscale.input_files import SYNTH_FILE_MAX_BYTES, read_text_bounded
from gpuscale.policy.rules import (
    EC2NODECLASS,
    HPA_TYPES,
    LEADERWORKERSET,
    NODEPOOL,
    SCALEDOBJECT,
    nodepool_selects_gpus,
)
from gpuscale.problems import Refusal
from gpuscale.spec.topology import DriftWindow
from gpuscale.synth.layout import FORMAT, RESOURCES_FILE
from gpuscale.synth.replacements import replacing

MARKDOWN_LIMIT = 60_000
"""Default ``--markdown`` budget: under GitHub's 65,536-character comment limit with room for a wrapper."""

Status = Literal["added", "removed", "changed"]
Category = Literal["gpu-nodes", "nodes", "autoscaling", "replacement", "rollout", "upgrade"]

CATEGORY_TITLES: dict[str, str] = {
    "gpu-nodes": "GPU nodes replaced or disrupted",
    "nodes": "Other nodes replaced or disrupted",
    "autoscaling": "Autoscaling thresholds and signals",
    "replacement": "Resources Pulumi replaces (delete + create)",
    "rollout": "Workload rollouts (pods restart)",
    "upgrade": "Chart upgrades",
}

_WORKLOAD_TYPES = frozenset({
    "kubernetes:apps/v1:Deployment", "kubernetes:apps/v1:StatefulSet", "kubernetes:apps/v1:DaemonSet",
    LEADERWORKERSET,
})
_SCALEDOBJECT_FIELDS = ("/spec/triggers", "/spec/minReplicaCount", "/spec/maxReplicaCount", "/spec/idleReplicaCount",
                        "/spec/advanced", "/spec/pollingInterval", "/spec/cooldownPeriod", "/spec/fallback",
                        "/spec/scaleTargetRef", "/metadata/annotations/autoscaling.keda.sh~1paused")
_HPA_FIELDS = ("/spec/metrics", "/spec/minReplicas", "/spec/maxReplicas", "/spec/behavior", "/spec/scaleTargetRef")
_ABSENT: Any = type("_Absent", (), {"__repr__": lambda self: "<absent>"})()


class NotASynthDirError(Refusal):
    """A directory that is not the output of ``gpuscale synth``."""

    def __init__(self, path: Path, reason: str) -> None:
        self.path = path
        self.reason = reason
        super().__init__(f"{path}: not a gpuscale synth output ({reason}); create one with gpuscale synth --out DIR")


@dataclass(frozen=True)
class Synth:
    """One loaded synth output."""

    path: Path
    project: str
    stack: str
    region: str
    resources: dict[str, dict[str, Any]]
    """Resource key -> entry of ``resources.json``."""
    outputs: dict[str, Any]


@dataclass(frozen=True)
class FieldChange:
    """One leaf that differs; ``before``/``after`` are ``_ABSENT`` for an added/removed field."""

    path: str
    before: Any = _ABSENT
    after: Any = _ABSENT

    @property
    def kind(self) -> Status:
        if self.before is _ABSENT:
            return "added"
        if self.after is _ABSENT:
            return "removed"
        return "changed"


@dataclass(frozen=True)
class ResourceDiff:
    key: str
    type: str
    name: str
    status: Status
    changes: tuple[FieldChange, ...] = ()
    label: str = ""
    """``Kind namespace/name`` for Kubernetes objects, ``Kind logical-name`` otherwise."""


@dataclass(frozen=True)
class Highlight:
    category: Category
    key: str
    label: str
    message: str


@dataclass(frozen=True)
class SynthDiff:
    base: str
    head: str
    resources: tuple[ResourceDiff, ...]
    outputs: tuple[FieldChange, ...]
    highlights: tuple[Highlight, ...]
    unchanged: int
    base_stack: str = ""
    head_stack: str = ""
    counts: dict[str, Counter[str]] = field(default_factory=dict)
    """Status -> kind -> number of resources."""

    @property
    def different(self) -> bool:
        return bool(self.resources or self.outputs)


# --- loading --------------------------------------------------------------------------------------------------


_ENTRY_FIELDS: tuple[tuple[str, type | tuple[type, ...], str], ...] = (
    ("key", str, "a string"), ("type", str, "a string"), ("name", str, "a string"), ("inputs", dict, "an object"),
    ("parent", (str, type(None)), "a string or null"), ("provider", (str, type(None)), "a string or null"),
    ("dependsOn", list, "a list"), ("custom", bool, "true or false"),
)
"""Fields of a ``resources.json`` entry that the diff reads, with the JSON type ``gpuscale synth`` writes."""


def load_synth(path: Path) -> Synth:
    """Read ``path/resources.json``; raises ``NotASynthDirError`` for anything else."""
    if not path.is_dir():
        raise NotASynthDirError(path, "no such directory")
    file = path / RESOURCES_FILE
    if not file.is_file():
        raise NotASynthDirError(path, f"no {RESOURCES_FILE}")
    try:
        doc = json.loads(read_text_bounded(file, SYNTH_FILE_MAX_BYTES, "a synth resources.json"))
    except (OSError, ValueError, RecursionError) as exc:
        raise NotASynthDirError(path, f"{RESOURCES_FILE} is not JSON: {exc}") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT or not isinstance(doc.get("resources"), list):
        raise NotASynthDirError(path, f"{RESOURCES_FILE} has no format: {FORMAT}")
    resources = {entry["key"]: entry for entry in _entries(path, doc["resources"])}
    for name in ("project", "stack", "region"):
        if not isinstance(doc.get(name, ""), str):
            raise NotASynthDirError(path, f"{RESOURCES_FILE}: {name} is {type(doc[name]).__name__}, expected a string")
    outputs = doc.get("outputs")
    return Synth(
        path=path, project=str(doc.get("project", "")), stack=str(doc.get("stack", "")),
        region=str(doc.get("region", "")), resources=resources, outputs=outputs if isinstance(outputs, dict) else {},
    )


def _entries(path: Path, entries: list[Any]) -> list[dict[str, Any]]:
    """The resource entries of a ``resources.json``, each with a key, a type and its fields of the JSON type synth
    writes; ``NotASynthDirError`` naming the first that is not."""
    for i, entry in enumerate(entries):
        if not isinstance(entry, dict) or "key" not in entry or "type" not in entry:
            raise NotASynthDirError(path, f"{RESOURCES_FILE} has a resource without key/type")
        for name, kinds, label in _ENTRY_FIELDS:
            if name in entry and not isinstance(entry[name], kinds):
                raise NotASynthDirError(
                    path, f"{RESOURCES_FILE}: resources[{i}].{name} is {type(entry[name]).__name__}, expected {label}",
                )
    return entries


# --- diffing --------------------------------------------------------------------------------------------------


def diff_synth_dirs(base: Path, head: Path) -> SynthDiff:
    return diff_synths(load_synth(base), load_synth(head))


def diff_synths(a: Synth, b: Synth) -> SynthDiff:
    """Resources and outputs that differ between ``a`` (base) and ``b`` (head), with highlights."""
    diffs: list[ResourceDiff] = []
    unchanged = 0
    for key in sorted(a.resources.keys() | b.resources.keys()):
        ea, eb = a.resources.get(key), b.resources.get(key)
        entry = eb if eb is not None else ea
        assert entry is not None
        label = resource_label(entry)
        if ea is None:
            diffs.append(ResourceDiff(key, entry["type"], entry.get("name", ""), "added", label=label))
        elif eb is None:
            diffs.append(ResourceDiff(key, entry["type"], entry.get("name", ""), "removed", label=label))
        else:
            changes = resource_changes(ea, eb)
            if changes:
                diffs.append(ResourceDiff(key, entry["type"], entry.get("name", ""), "changed", tuple(changes), label))
            else:
                unchanged += 1
    order = {"removed": 0, "changed": 1, "added": 2}
    diffs.sort(key=lambda d: (order[d.status], d.key))
    counts: dict[str, Counter[str]] = {s: Counter() for s in order}
    for d in diffs:
        counts[d.status][_kind(d.type)] += 1
    return SynthDiff(
        base=str(a.path), head=str(b.path), resources=tuple(diffs),
        outputs=tuple(diff_values(a.outputs, b.outputs)), highlights=tuple(highlights(diffs, a, b)),
        unchanged=unchanged, base_stack=a.stack, head_stack=b.stack, counts=counts,
    )


def resource_changes(a: Mapping[str, Any], b: Mapping[str, Any]) -> list[FieldChange]:
    """Input changes as JSON pointers, then changes of parent/provider/dependencies as ``@parent`` etc."""
    out = diff_values(a.get("inputs"), b.get("inputs"))
    for meta in ("parent", "provider", "dependsOn", "custom"):
        if _canon(a.get(meta)) != _canon(b.get(meta)):
            out.append(FieldChange(f"@{meta}", a.get(meta), b.get(meta)))
    return out


def diff_values(a: Any, b: Any, path: str = "") -> list[FieldChange]:
    """Leaf-level differences between two JSON values (see the module docstring for list matching)."""
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        out: list[FieldChange] = []
        for k in sorted(set(a) | set(b), key=str):
            p = f"{path}/{_escape(str(k))}"
            if k not in a:
                out.append(FieldChange(p, after=b[k]))
            elif k not in b:
                out.append(FieldChange(p, before=a[k]))
            else:
                out.extend(diff_values(a[k], b[k], p))
        return out
    if _is_list(a) and _is_list(b):
        return _diff_lists(list(a), list(b), path)
    if _canon(a) != _canon(b):
        return [FieldChange(path or "/", a, b)]
    return []


def _diff_lists(a: list[Any], b: list[Any], path: str) -> list[FieldChange]:
    ident = _identity_field(a, b)
    if ident is not None:
        return _diff_keyed(a, b, path, ident)
    out: list[FieldChange] = []
    matcher = difflib.SequenceMatcher(a=[_canon(x) for x in a], b=[_canon(y) for y in b], autojunk=False)
    for op, i1, i2, j1, j2 in matcher.get_opcodes():
        if op == "equal":
            continue
        if op == "replace" and i2 - i1 == j2 - j1:
            for i, j in zip(range(i1, i2), range(j1, j2), strict=True):
                out.extend(diff_values(a[i], b[j], f"{path}/{j}"))
            continue
        out.extend(FieldChange(f"{path}/{i}", before=a[i]) for i in range(i1, i2))
        out.extend(FieldChange(f"{path}/{j}", after=b[j]) for j in range(j1, j2))
    return out


def _diff_keyed(a: list[Any], b: list[Any], path: str, ident: str) -> list[FieldChange]:
    """Lists of objects with an identity field (containers by ``name``): matched by it, not by position."""
    pos_a = {x[ident]: i for i, x in enumerate(a)}
    pos_b = {x[ident]: i for i, x in enumerate(b)}
    out = [FieldChange(f"{path}/{i}", before=x) for i, x in enumerate(a) if x[ident] not in pos_b]
    for j, y in enumerate(b):
        if y[ident] not in pos_a:
            out.append(FieldChange(f"{path}/{j}", after=y))
        else:
            out.extend(diff_values(a[pos_a[y[ident]]], y, f"{path}/{j}"))
    return out


def _identity_field(a: list[Any], b: list[Any]) -> str | None:
    for ident in ("name", "key"):
        ok = True
        for side in (a, b):
            if not side or not all(isinstance(x, Mapping) and isinstance(x.get(ident), str) for x in side):
                ok = False
                break
            if len({x[ident] for x in side}) != len(side):
                ok = False
                break
        if ok:
            return ident
    return None


# --- highlights -----------------------------------------------------------------------------------------------


def highlights(diffs: Sequence[ResourceDiff], a: Synth, b: Synth) -> list[Highlight]:
    """What a reviewer must see first, in category order, then by resource key."""
    gpu_classes = _gpu_node_class_names(a) | _gpu_node_class_names(b)
    out: list[Highlight] = []
    for d in diffs:
        entry = (b.resources.get(d.key) if d.status != "removed" else a.resources.get(d.key)) or {}
        before = a.resources.get(d.key) or {}
        out.extend(_node_highlights(d, entry, gpu_classes, b, before))
        out.extend(_autoscaling_highlights(d))
        out.extend(_replacement_highlights(d, entry, provider_inputs(b, entry)))
        out.extend(_rollout_highlights(d, entry, before))
        out.extend(_upgrade_highlights(d))
    rank = {c: i for i, c in enumerate(CATEGORY_TITLES)}
    return sorted(out, key=lambda h: (rank[h.category], h.key))


def drift_pacing(nodepool_spec: Mapping[str, Any]) -> str:
    """How Karpenter will roll a NodePool's drifted nodes, read from its budgets and template (disruption.md "Budgets",
    "TerminationGracePeriod"): how many at a time, in which window, and whether drift may force-evict serving pods."""
    budgets = [_map(b) for b in _list(_map(nodepool_spec.get("disruption")).get("budgets"))] or [{"nodes": "10%"}]
    drift = [b for b in budgets if not b.get("reasons") or "Drifted" in _list(b.get("reasons"))]
    always = [str(b.get("nodes")) for b in drift if not b.get("schedule")]
    frozen = _freezes(nodepool_spec)
    if "0" in always:
        text = "drift frozen (a Drifted budget of 0 nodes with no schedule): no node rolls until that budget changes"
    else:
        pace = min(always, key=lambda n: (n.endswith("%"), int(n.rstrip("%")))) if always else "10%"
        text = f"drifted nodes roll {pace} at a time"
        if frozen:
            text += ", " + "; ".join(_window(str(b["schedule"]), str(b.get("duration", ""))) for b in frozen)
        else:
            text += " at any hour (no drift window)"
    tgp = _map(_map(_map(nodepool_spec.get("template")).get("spec"))).get("terminationGracePeriod")
    if tgp:
        text += (f"; terminationGracePeriod {tgp}: drift disrupts a node despite PDBs and karpenter.sh/do-not-disrupt "
                 "and force-deletes its serving pods when it elapses")
    else:
        text += "; each node waits until the PDBs of its pods allow the eviction (a role at its ready floor holds it)"
    return text


def _freezes(nodepool_spec: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The budgets that freeze drift on a schedule (``nodes: "0"`` for ``Drifted``): what leaves a drift window."""
    budgets = [_map(b) for b in _list(_map(nodepool_spec.get("disruption")).get("budgets"))]
    return [b for b in budgets if b.get("schedule") and str(b.get("nodes")) == "0"
            and (not b.get("reasons") or "Drifted" in _list(b.get("reasons")))]


def _window(schedule: str, duration: str) -> str:
    """A freeze budget as the drift window it leaves open (the spec's own inverse of the budget it emits), else as
    written."""
    window = DriftWindow.from_freeze_budget(schedule, duration)
    if window is None:
        return f"drift frozen from cron '{schedule}' (UTC) for {duration}"
    return f"only in the drift window {window.describe()} (frozen from cron '{schedule}' for {duration})"


def drift_windows(nodepool_spec: Mapping[str, Any]) -> str:
    """The drift windows a NodePool's budgets leave, as the spec writes them (``sun 06:00 UTC for 6h``)."""
    freezes = _freezes(nodepool_spec)
    if not freezes:
        return "none (drift at any hour)"
    windows = [DriftWindow.from_freeze_budget(str(b["schedule"]), str(b.get("duration", ""))) for b in freezes]
    return "; ".join(w.describe() if w is not None else f"frozen from cron '{b['schedule']}' for {b.get('duration')}"
                     for w, b in zip(windows, freezes, strict=True))


def _pools_of_class(s: Synth, class_name: str) -> list[Mapping[str, Any]]:
    """Specs of the NodePools whose nodeClassRef names ``class_name``."""
    out = []
    for entry in s.resources.values():
        spec = _map(_inputs(entry).get("spec"))
        ref = _map(_map(_map(spec.get("template")).get("spec")).get("nodeClassRef"))
        if entry.get("type") == NODEPOOL and ref.get("name") == class_name:
            out.append(spec)
    return out


def _node_highlights(
    d: ResourceDiff, entry: Mapping[str, Any], gpu_classes: set[str], head: Synth | None = None,
    before: Mapping[str, Any] | None = None,
) -> list[Highlight]:
    if d.type == NODEPOOL:
        return _nodepool_highlights(d, _map(_inputs(entry).get("spec")), _map(_inputs(before or {}).get("spec")))
    if d.type == EC2NODECLASS:
        return _nodeclass_highlights(d, entry, gpu_classes, head)
    return []


def _nodepool_highlights(d: ResourceDiff, spec: Mapping[str, Any], base: Mapping[str, Any]) -> list[Highlight]:
    """A NodePool's changes as what they do to its nodes: drift, requirements, its drift window, disruption, limits."""
    gpu = nodepool_selects_gpus(spec)
    cat: Category = "gpu-nodes" if gpu else "nodes"
    if d.status == "removed":
        return [Highlight(cat, d.key, d.label, "NodePool removed: Karpenter terminates every node it launched")]
    if d.status == "added":
        return []
    out: list[Highlight] = []
    drift = [c for c in d.changes if c.path.startswith("/spec/template")]
    resolved = [c for c in drift if c.path.startswith("/spec/template/spec/requirements")]
    hashed = [c for c in drift if c not in resolved]
    if hashed:
        out.append(Highlight(cat, d.key, d.label, (
            f"drift: {_paths(hashed)} changed; every node of this NodePool will be replaced"
            + (" (each GPU node replaced is a model cold start)" if gpu else "") + f": {drift_pacing(spec)}"
        )))
    if resolved:
        out.append(Highlight(cat, d.key, d.label, (
            f"requirements changed ({_paths(resolved)}): nodes that no longer satisfy them drift and are replaced: "
            f"{drift_pacing(spec)}"
        )))
    disruption = [c for c in d.changes if c.path.startswith("/spec/disruption")]
    windows = drift_windows(base), drift_windows(spec)
    if windows[0] != windows[1]:
        # the freeze budget is how the window is emitted; reviewers think in windows, so say it as one
        out.append(Highlight(cat, d.key, d.label, f"drift window: {windows[0]} -> {windows[1]}"))
        disruption = [c for c in disruption if not c.path.startswith("/spec/disruption/budgets")]
    if disruption:
        out.append(Highlight(cat, d.key, d.label, f"disruption behaviour: {_change_list(disruption)}"))
    limits = [c for c in d.changes if c.path.startswith("/spec/limits")]
    if limits:
        out.append(Highlight(cat, d.key, d.label, f"capacity ceiling: {_change_list(limits)}"))
    return out


def _nodeclass_highlights(
    d: ResourceDiff, entry: Mapping[str, Any], gpu_classes: set[str], head: Synth | None,
) -> list[Highlight]:
    """An EC2NodeClass's changes as the drift of every node launched from it, paced by the NodePools using it."""
    name = str(_map(_inputs(entry).get("metadata")).get("name", ""))
    cat: Category = "gpu-nodes" if name in gpu_classes else "nodes"
    if d.status == "removed":
        return [Highlight(cat, d.key, d.label, "EC2NodeClass removed: the NodePools using it cannot launch nodes")]
    spec_changes = [c for c in d.changes if c.path.startswith("/spec")]
    if d.status != "changed" or not spec_changes:
        return []
    ami = [c for c in spec_changes if c.path.startswith("/spec/amiSelectorTerms")]
    what = f"new AMI ({_change_list(ami)})" if ami else f"{_paths(spec_changes)} changed"
    pools = _pools_of_class(head, name) if head is not None else []
    pacing = "; ".join(drift_pacing(p) for p in pools) or "paced by the NodePool disruption budgets"
    return [Highlight(cat, d.key, d.label, (
        f"drift: {what}; every node launched from this EC2NodeClass will be replaced"
        + (" (each GPU node replaced is a model cold start)" if cat == "gpu-nodes" else "") + f": {pacing}"
    ))]


def _autoscaling_highlights(d: ResourceDiff) -> list[Highlight]:
    fields: tuple[str, ...]
    if d.type == SCALEDOBJECT:
        fields = _SCALEDOBJECT_FIELDS
    elif d.type in HPA_TYPES:
        fields = _HPA_FIELDS
    else:
        return []
    if d.status != "changed":
        return [Highlight("autoscaling", d.key, d.label, f"autoscaler {d.status}")]
    picked = [c for c in d.changes if c.path.startswith(fields)]
    return [Highlight("autoscaling", d.key, d.label, _change_list(picked, limit=6))] if picked else []


def provider_inputs(s: Synth, entry: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The inputs of the provider ``entry`` is created through, when the synth holds it (the platform's own)."""
    provider = s.resources.get(entry.get("provider") or "")
    return _inputs(provider) if provider is not None else None


def replacements(d: ResourceDiff, entry: Mapping[str, Any],
                 provider: Mapping[str, Any] | None) -> list[tuple[FieldChange, str]]:
    """The changes of ``d`` for which Pulumi replaces the resource (delete + create), each with why: a new parent
    (a new URN), or a field the Kubernetes provider replaces the object for (``gpuscale.synth.replacements``)."""
    if d.status != "changed":
        return []
    out = [(c, "parent") for c in d.changes if c.path == "@parent"]
    inputs = [c for c in d.changes if not c.path.startswith("@")]
    by_path = {c.path: c for c in inputs}
    hits = replacing(d.type, _inputs(entry), provider,
                     [(c.path, None if c.after is _ABSENT else c.after) for c in inputs])
    return out + [(by_path[path], rule.why) for path, rule in hits]


def planned_op(d: ResourceDiff, a: Synth, b: Synth) -> Literal["create", "delete", "update", "replace"]:
    """The step ``pulumi preview`` plans for ``d``: a replace where ``replacements`` finds one, else an update."""
    if d.status == "added":
        return "create"
    if d.status == "removed":
        return "delete"
    entry = b.resources[d.key]
    return "replace" if replacements(d, entry, provider_inputs(b, entry)) else "update"


def _replacement_highlights(d: ResourceDiff, entry: Mapping[str, Any],
                            provider: Mapping[str, Any] | None) -> list[Highlight]:
    out: list[Highlight] = []
    for c, why in replacements(d, entry, provider):
        if why == "parent":
            out.append(Highlight("replacement", d.key, d.label, (
                f"parent {c.before} -> {c.after}: the URN changes, so Pulumi deletes and recreates it unless the "
                "component passes aliases=[pulumi.Alias(parent=...)]"
            )))
        else:
            out.append(Highlight("replacement", d.key, d.label, f"{_change_list([c])}: {why}; Pulumi replaces it"))
    return out


def _rollout_highlights(d: ResourceDiff, head: Mapping[str, Any], base: Mapping[str, Any]) -> list[Highlight]:
    if d.type not in _WORKLOAD_TYPES or d.status != "changed":
        return []
    template = "/spec/leaderWorkerTemplate" if d.type == LEADERWORKERSET else "/spec/template"
    changed = [c for c in d.changes if c.path.startswith(template) and not c.path.endswith("/size")]
    if not changed:
        return []
    gpu = _mentions_gpu(_inputs(head)) or _mentions_gpu(_inputs(base))
    why = "every GPU pod restarts and reloads the model (cold start per replica)" if gpu else "pods restart"
    return [Highlight("rollout", d.key, d.label, f"{_paths(changed)} changed: {why}")]


def _upgrade_highlights(d: ResourceDiff) -> list[Highlight]:
    if not d.type.startswith("kubernetes:helm.sh/") or d.status != "changed":
        return []
    picked = [c for c in d.changes if c.path in ("/version", "/chart")]
    return [Highlight("upgrade", d.key, d.label, _change_list(picked))] if picked else []


def _gpu_node_class_names(s: Synth) -> set[str]:
    """EC2NodeClass names referenced by a GPU NodePool."""
    names: set[str] = set()
    for entry in s.resources.values():
        if entry.get("type") != NODEPOOL:
            continue
        spec = _map(_inputs(entry).get("spec"))
        if nodepool_selects_gpus(spec):
            ref = _map(_map(_map(spec.get("template")).get("spec")).get("nodeClassRef"))
            if ref.get("name"):
                names.add(str(ref["name"]))
    return names


def _mentions_gpu(inputs: Mapping[str, Any]) -> bool:
    return f'"{labels.GPU_RESOURCE}"' in json.dumps(inputs.get("spec"), sort_keys=True)


# --- rendering ------------------------------------------------------------------------------------------------


def render_text(d: SynthDiff, *, value_chars: int = 300) -> str:
    """Plain text for a terminal or a log: the summary first, then every changed field."""
    lines = [f"gpuscale diff: {d.base} ({d.base_stack}) -> {d.head} ({d.head_stack})", _count_line(d)]
    for status in ("removed", "changed", "added"):
        if d.counts.get(status):
            lines.append(f"  {status}: {_kinds(d.counts[status])}")
    for cat, items in _grouped(d.highlights):
        lines.append("")
        lines.append(f"{CATEGORY_TITLES[cat]} ({len(items)}):")
        lines.extend(f"  ! {h.label} [{h.key}]: {h.message}" for h in items)
    if d.resources:
        lines.append("")
        lines.append("Resources:")
    for r in d.resources:
        sign = {"added": "+", "removed": "-", "changed": "~"}[r.status]
        lines.append(f"{sign} {r.key} ({r.status})")
        lines.extend(f"    {_change_line(c, value_chars)}" for c in r.changes)
    if d.outputs:
        lines.append("")
        lines.append("Stack outputs:")
        lines.extend(f"    {_change_line(c, value_chars)}" for c in d.outputs)
    if not d.different:
        lines.append("No differences.")
    return "\n".join(lines) + "\n"


def render_markdown(
    d: SynthDiff, *, limit: int = MARKDOWN_LIMIT, max_fields: int = 25, value_chars: int = 160
) -> str:
    """Markdown for a PR comment, never longer than ``limit`` characters.

    The summary (counts, then highlights, merged where resources share a message) takes at most half the budget;
    per-resource details follow while they fit (resources with identical changes share one block, each capped at
    ``max_fields`` fields), and what is left out is counted at the end.
    """
    budget = max(limit - 400, 0)  # room for the closing note
    out = _md_counts(d)
    highlights, dropped_highlights = _md_highlights(d.highlights, budget // 2 - len(out))
    out += highlights
    details, omitted, outputs_left_out = _md_details(d, budget - len(out), max_fields, value_chars)
    out += details
    notes = []
    if dropped_highlights:
        notes.append(f"{dropped_highlights} highlight(s) left out to fit the comment")
    if omitted:
        notes.append(f"details of {omitted} resource(s) left out to fit the comment")
    if outputs_left_out:
        notes.append("stack output changes left out to fit the comment")
    if notes:
        out += f"\n_{'; '.join(notes)}: run `gpuscale diff` on the synth artifacts for the full diff._\n"
    if len(out) > limit:  # only reachable with a tiny limit
        out = out[: max(limit - 2, 0)] + "…\n"
    return out


def _md_counts(d: SynthDiff) -> str:
    head = [f"### gpuscale synth diff: `{d.base_stack or d.base}` → `{d.head_stack or d.head}`", "",
            f"**{_count_line(d)}**", ""]
    head += [f"- {status}: {_kinds(d.counts[status])}" for status in ("removed", "changed", "added") if d.counts.get(status)]
    if not d.different:
        head.append("No differences: the change does not alter what the program creates.")
    return "\n".join(head) + "\n"


def _md_highlights(items: Sequence[Highlight], budget: int) -> tuple[str, int]:
    """Highlight sections within ``budget`` characters, and how many highlights did not fit."""
    out, dropped = "", 0
    for cat, group in _grouped(items):
        section = f"\n#### {CATEGORY_TITLES[cat]} ({len(group)})\n\n"
        if len(out) + len(section) > budget:
            dropped += len(group)
            continue
        out += section
        left = len(group)
        for message, labels_ in _same_message(group):
            line = f"- {_md_labels(labels_)}: {_md_escape(_clip(message, 600))}\n"
            if len(out) + len(line) > budget:
                dropped += left
                break
            out += line
            left -= len(labels_)
    return out, dropped


def _md_details(d: SynthDiff, budget: int, max_fields: int, value_chars: int) -> tuple[str, int, bool]:
    """Detail blocks within ``budget``: (text, resources left out, whether the output changes were left out)."""
    blocks = [_md_block(group, max_fields, value_chars) for group in _same_changes(d.resources)]
    if d.outputs:
        blocks.append((_md_outputs(d.outputs, max_fields, value_chars), 0))
    if not blocks:
        return "", 0, False
    out = "\n#### Details\n\n"
    for i, (block, _n) in enumerate(blocks):
        if len(out) + len(block) > budget:
            return out, sum(n for _, n in blocks[i:]), bool(d.outputs)
        out += block
    return out, 0, False


def _same_changes(resources: Sequence[ResourceDiff]) -> list[list[ResourceDiff]]:
    """Changed resources with identical field changes grouped (one flag bumped on every model), others alone."""
    groups: dict[tuple[str, ...], list[ResourceDiff]] = {}
    out: list[list[ResourceDiff]] = []
    for r in resources:
        if r.status != "changed":
            out.append([r])
            continue
        sig = (r.type, *(f"{c.kind}\0{c.path}\0{_canon_side(c.before)}\0{_canon_side(c.after)}" for c in r.changes))
        if sig not in groups:
            groups[sig] = []
            out.append(groups[sig])
        groups[sig].append(r)
    return out


def _md_block(group: Sequence[ResourceDiff], max_fields: int, value_chars: int) -> tuple[str, int]:
    """One collapsible block (and how many resources it covers) for one resource or a group with equal changes."""
    r = group[0]
    sign = {"added": "+", "removed": "-", "changed": "~"}[r.status]
    fields = f"{len(r.changes)} field{'s' if len(r.changes) != 1 else ''}"
    if len(group) == 1:
        summary = f"{sign} <code>{_html(r.key)}</code> ({r.status}" + (f", {fields})" if r.changes else ")")
    else:
        summary = f"{sign} {len(group)} × {_html(_kind(r.type))} with the same {fields} changed"
    if not r.changes:  # a plain list item: the status in parentheses says it, a leading sign would nest the bullet
        return f"- {summary.removeprefix(sign + ' ')}\n", 1
    lines = []
    if len(group) > 1:
        keys = [g.key for g in group]
        lines = [f"# {k}" for k in keys[:10]] + ([f"# … and {len(keys) - 10} more"] if len(keys) > 10 else [])
    lines += [_change_line(c, value_chars) for c in r.changes[:max_fields]]
    if len(r.changes) > max_fields:
        lines.append(f"… {len(r.changes) - max_fields} more field(s)")
    body = "\n".join(lines).replace("```", "`\u200b``")
    return f"<details><summary>{summary}</summary>\n\n```\n{body}\n```\n</details>\n", len(group)


def _same_message(items: Sequence[Highlight]) -> list[tuple[str, list[str]]]:
    """Highlights with the same message merged, in first-seen order: ``(message, labels)``."""
    merged: dict[str, list[str]] = {}
    for h in items:
        merged.setdefault(h.message, []).append(h.label)
    return list(merged.items())


def _md_labels(labels_: Sequence[str], show: int = 5) -> str:
    if len(labels_) == 1:
        return f"**{_md_escape(labels_[0])}**"
    shown = ", ".join(_md_escape(x) for x in labels_[:show])
    more = f", … +{len(labels_) - show} more" if len(labels_) > show else ""
    return f"**{len(labels_)} resources** ({shown}{more})"


def _md_outputs(changes: Sequence[FieldChange], max_fields: int, value_chars: int) -> str:
    lines = [_change_line(c, value_chars) for c in changes[:max_fields]]
    if len(changes) > max_fields:
        lines.append(f"… {len(changes) - max_fields} more")
    body = "\n".join(lines).replace("```", "`\u200b``")
    return f"<details><summary>stack outputs ({len(changes)})</summary>\n\n```\n{body}\n```\n</details>\n"


def _count_line(d: SynthDiff) -> str:
    n = Counter(r.status for r in d.resources)
    text = f"{n['added']} added, {n['removed']} removed, {n['changed']} changed, {d.unchanged} unchanged"
    if d.outputs:
        text += f"; {len(d.outputs)} stack output field(s) differ"
    return text


def _kinds(c: Counter[str]) -> str:
    return ", ".join(f"{n} {k}" for k, n in sorted(c.items(), key=lambda kv: (-kv[1], kv[0])))


def _grouped(items: Sequence[Highlight]) -> list[tuple[Category, list[Highlight]]]:
    groups: dict[Category, list[Highlight]] = {}
    for h in items:
        groups.setdefault(h.category, []).append(h)
    return list(groups.items())


def _change_line(c: FieldChange, value_chars: int) -> str:
    if c.kind == "added":
        return f"+ {c.path}: {_fmt(c.after, value_chars)}"
    if c.kind == "removed":
        return f"- {c.path}: {_fmt(c.before, value_chars)}"
    return f"~ {c.path}: {_fmt(c.before, value_chars)} -> {_fmt(c.after, value_chars)}"


def _change_list(changes: Sequence[FieldChange], limit: int = 4) -> str:
    parts = [_change_line(c, 80)[2:] for c in changes[:limit]]
    if len(changes) > limit:
        parts.append(f"{len(changes) - limit} more")
    return "; ".join(parts)


def _paths(changes: Sequence[FieldChange], limit: int = 4) -> str:
    paths = list(dict.fromkeys(c.path for c in changes))
    text = ", ".join(paths[:limit])
    return text + (f" and {len(paths) - limit} more" if len(paths) > limit else "")


def _fmt(value: Any, chars: int) -> str:
    return _clip(json.dumps(value, sort_keys=True, ensure_ascii=False), chars)


def _clip(text: str, chars: int) -> str:
    return text if len(text) <= chars else text[: max(chars - 1, 0)] + "…"


def _md_escape(text: str) -> str:
    return _html(text).replace("|", "\\|").replace("*", "\\*").replace("_", "\\_").replace("`", "\\`")


def _html(text: str) -> str:
    # '<' would open an HTML tag in GitHub markdown; '>' mid-line is harmless and keeps "->" readable
    return text.replace("&", "&amp;").replace("<", "&lt;")


def resource_label(entry: Mapping[str, Any]) -> str:
    """``NodePool h100`` / ``Deployment inference/llama-decode`` / ``Role karpenter-node``."""
    kind = _kind(str(entry.get("type", "")))
    meta = _map(_inputs(entry).get("metadata"))
    if meta.get("name"):
        ns = meta.get("namespace")
        return f"{kind} {ns + '/' if ns else ''}{meta['name']}"
    return f"{kind} {entry.get('name', '')}"


def _kind(type_token: str) -> str:
    return type_token.rsplit(":", 1)[-1]


def _inputs(entry: Mapping[str, Any]) -> Mapping[str, Any]:
    return _map(entry.get("inputs"))


def _map(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _list(value: Any) -> list[Any]:
    return list(value) if isinstance(value, list | tuple) else []


def _is_list(value: Any) -> bool:
    return isinstance(value, list | tuple)


def _canon(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False)


def _canon_side(value: Any) -> str:
    return "" if value is _ABSENT else _canon(value)


def _escape(key: str) -> str:
    return key.replace("~", "~0").replace("/", "~1")
