"""Which input changes make the Kubernetes provider replace an object (delete + create) instead of updating it.

A model of pulumi-kubernetes ``provider/pkg/provider/diff.go`` ``forceNewProperties`` at the provider the real-engine
tier builds (``gpuscale.versions.E2E_PULUMI_KUBERNETES``, f47bc2d6, about v4.25.0), so that ``gpuscale diff`` (what a
PR's reviewers read) says "replace" exactly where ``pulumi preview`` will:

- every object: ``.metadata.name`` and ``.metadata.namespace`` (``metadataForceNewProperties``, diff.go L206-211;
  ``Diff`` adds them even for patch resources, provider.go L1431);
- a ConfigMap: ``.data`` and ``.binaryData``, unless its provider has ``enableConfigMapMutable`` and the ConfigMap is
  not ``immutable: true`` (diff.go L31-32; the option is read in provider.go L586-600: the provider's own input first,
  then the ``PULUMI_K8S_ENABLE_CONFIGMAP_MUTABLE`` environment variable, default off);
- a Secret: ``.type``, and ``.stringData``/``.data`` unless ``enableSecretMutable`` (diff.go L27-28);
- the kinds of the ``forceNew`` table that the API server still serves (diff.go L44-203): workloads' ``.spec.selector``,
  a StatefulSet's identity fields, a Job's template, a Service's ``.spec.clusterIP``, a PVC's claim fields, a
  (Cluster)RoleBinding's ``.roleRef``, a StorageClass's ``.parameters``/``.provisioner``. The table's
  ``policy/v1beta1`` PodDisruptionBudget entry is not here: ``policy/v1`` (what gpuscale emits) is not in the table,
  so a PDB updates in place.

A change matches a rule when it is at or under the rule's path (``openapi.PatchPropertiesChanged`` runs the rule's
JSONPath over the change's patch slice, provider.go L2927, pkg/openapi/match.go L29-47), or when a whole subtree is
added that holds the rule's path.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

CONFIGMAP_MUTABLE_OPTION = "enableConfigMapMutable"
"""The Kubernetes provider's input that lets a ConfigMap's data be updated in place (schema.go L175 at f47bc2d6)."""
SECRET_MUTABLE_OPTION = "enableSecretMutable"


@dataclass(frozen=True)
class Rule:
    """A field the provider replaces the object for, with the reason a reviewer reads."""

    path: str
    """JSON pointer; ``*`` matches any list index."""
    why: str


_IDENTITY = (Rule("/metadata/name", "a new Kubernetes name"), Rule("/metadata/namespace", "a new namespace"))
_SELECTOR = "the selector is immutable, so the workload is replaced (all pods at once)"
_SELECTOR_RULES = (Rule("/spec/selector", _SELECTOR),)

_KINDS: dict[tuple[str, str, str], tuple[Rule, ...]] = {
    **{("apps", "v1", kind): _SELECTOR_RULES for kind in ("Deployment", "DaemonSet")},
    ("apps", "v1", "StatefulSet"): (*_SELECTOR_RULES, *(Rule(f"/spec/{f}", f"a StatefulSet's {f} is immutable") for f in (
        "podManagementPolicy", "revisionHistoryLimit", "serviceName", "volumeClaimTemplates"))),
    ("batch", "v1", "Job"): tuple(Rule(f"/spec/{f}", f"a Job's {f} is immutable") for f in (
        "completions", "parallelism", "selector", "template")),
    ("core", "v1", "Service"): (Rule("/spec/clusterIP", "a Service's clusterIP is immutable"),),
    ("core", "v1", "PersistentVolumeClaim"): tuple(Rule(f"/spec/{f}", f"a claim's {f} is immutable") for f in (
        "accessModes", "selector", "storageClassName", "volumeName")),
    ("core", "v1", "ResourceQuota"): (Rule("/spec/scopes", "a ResourceQuota's scopes are immutable"),),
    **{("rbac.authorization.k8s.io", "v1", kind): (Rule("/roleRef", "a binding's roleRef is immutable"),)
       for kind in ("RoleBinding", "ClusterRoleBinding")},
    ("storage.k8s.io", "v1", "StorageClass"): tuple(
        Rule(f"/{f}", f"a StorageClass's {f} is immutable") for f in ("parameters", "provisioner")),
}


def group_version_kind(type_token: str) -> tuple[str, str, str] | None:
    """``kubernetes:apps/v1:Deployment`` -> ``("apps", "v1", "Deployment")``; ``None`` for anything else (a
    provider, a component, a chart, an AWS resource)."""
    parts = type_token.split(":")
    if len(parts) != 3 or parts[0] != "kubernetes" or "/" not in parts[1]:
        return None
    group, _, version = parts[1].rpartition("/")
    return group, version, parts[2]


def option_on(provider_inputs: Mapping[str, Any] | None, option: str) -> bool:
    """Whether a provider input is set true. Provider inputs reach the engine as strings (the SDK serialises every
    non-string provider input to JSON) and the provider compares them with ``"true"`` (provider.go L588-589)."""
    value = (provider_inputs or {}).get(option)
    return value is True or (isinstance(value, str) and value.strip().lower() == "true")


def rules(type_token: str, inputs: Mapping[str, Any], provider_inputs: Mapping[str, Any] | None) -> tuple[Rule, ...]:
    """The fields whose change replaces an object of ``type_token`` with these ``inputs`` (the new side), through a
    provider with ``provider_inputs`` (``None``: the provider is not in the synth, so its options are unknown and
    taken as the provider's defaults)."""
    gvk = group_version_kind(type_token)
    if gvk is None:
        return ()
    group, version, kind = gvk
    if (group, version) == ("core", "v1") and kind == "Secret":
        if option_on(provider_inputs, SECRET_MUTABLE_OPTION) and inputs.get("immutable") is not True:
            return (*_IDENTITY, Rule("/type", "a Secret's type is immutable"))
        why = "the Kubernetes provider replaces a Secret whose data changes (its enableSecretMutable is off)"
        return (*_IDENTITY, Rule("/type", "a Secret's type is immutable"), Rule("/stringData", why), Rule("/data", why))
    if (group, version) == ("core", "v1") and kind == "ConfigMap":
        if option_on(provider_inputs, CONFIGMAP_MUTABLE_OPTION) and inputs.get("immutable") is not True:
            return _IDENTITY
        why = ("the ConfigMap is immutable" if inputs.get("immutable") is True else
               f"the Kubernetes provider replaces a ConfigMap whose data changes (its {CONFIGMAP_MUTABLE_OPTION} is "
               "off)")
        return (*_IDENTITY, Rule("/binaryData", why), Rule("/data", why))
    return (*_IDENTITY, *_KINDS.get(gvk, ()))


def _segments(pointer: str) -> list[str]:
    return [s.replace("~1", "/").replace("~0", "~") for s in pointer.split("/")[1:]] if pointer not in ("", "/") else []


def _holds(value: Any, rest: Sequence[str]) -> bool:
    """Whether ``value`` has something at the relative path ``rest`` (``*`` any list item)."""
    if not rest:
        return True
    head, tail = rest[0], rest[1:]
    if isinstance(value, Mapping):
        return head in value and _holds(value[head], tail)
    if isinstance(value, list) and head == "*":
        return any(_holds(item, tail) for item in value)
    return False


def _matches(rule: Rule, path: str, added: Any) -> bool:
    want, got = _segments(rule.path), _segments(path)
    common = min(len(want), len(got))
    if any(w not in ("*", g) or (w == "*" and not g.isdigit()) for w, g in zip(want[:common], got[:common], strict=True)):
        return False
    return len(got) >= len(want) or _holds(added, want[len(got):])


def replacing(type_token: str, inputs: Mapping[str, Any], provider_inputs: Mapping[str, Any] | None,
              changes: Sequence[tuple[str, Any]]) -> list[tuple[str, Rule]]:
    """The ``(path, new value)`` input changes (JSON pointers, as ``gpuscale diff`` reads them) that make the provider
    replace the object, each with the rule it hits."""
    found: list[tuple[str, Rule]] = []
    for path, after in changes:
        rule = next((r for r in rules(type_token, inputs, provider_inputs) if _matches(r, path, after)), None)
        if rule is not None:
            found.append((path, rule))
    return found
