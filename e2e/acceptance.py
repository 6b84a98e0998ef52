"""Does the real API server accept everything a stack emits?

Install the pinned upstream CRDs (``../shared/crds``: the charts' own CRD files at the pinned tags), then server-side
apply every object of ``gpuscale synth --out DIR`` (``DIR/manifests/*.yaml``): the API server's own validation, CEL
rules and defaulting judge what our checker approximates. Nothing may be rejected, no warning may come back (a
deprecated API or field, an unknown field), and applying again must change nothing: ``kubectl diff --server-side``
(a dry-run apply compared with the live object) shows no difference for any object. The live object's status, which
running controllers update, is not what is compared: only what applying would change.

``python -m e2e.acceptance --stack-file F`` (``make e2e-apply STACK_FILE=F``) starts etcd and kube-apiserver, does
this for one stack file and exits 1 on any rejection, warning or change, 2 when it cannot run.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from e2e.kube import Kubectl, Result, load_documents

REPO = Path(__file__).resolve().parents[1]
SHARED_CRDS = REPO.parent / "shared" / "crds"


def crd_documents(root: Path = SHARED_CRDS) -> list[dict[str, Any]]:
    docs = []
    for path in sorted(root.rglob("*.yaml")):
        docs += [d for d in load_documents(path) if d.get("kind") == "CustomResourceDefinition"]
    return docs


CRD_BATCH_BYTES = 1_000_000
"""The most JSON one ``kubectl apply`` of CRDs carries (the largest pinned CRD, about 1 MB as JSON, goes alone)."""
CRD_APPLIERS = 3
"""kubectl processes applying batches at once: each is mostly waiting on the apiserver's OpenAPI rebuild."""


def crd_batches(docs: Sequence[dict[str, Any]], limit: int = CRD_BATCH_BYTES) -> list[list[dict[str, Any]]]:
    """The CRDs in batches of at most ``limit`` bytes of JSON each (a larger CRD in a batch of its own), in order."""
    batches: list[list[dict[str, Any]]] = []
    size = limit + 1
    for doc in docs:
        n = len(json.dumps(doc))
        if size + n > limit:
            batches.append([])
            size = 0
        batches[-1].append(doc)
        size += n
    return batches


def install_crds(kubectl: Kubectl, docs: Sequence[dict[str, Any]]) -> None:
    """Apply ``docs`` in size-bounded batches, a few kubectl processes at a time, then wait once for all of them to
    be Established (one CRD per kubectl call, one after another, took 2 of a run's first 5 minutes)."""
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=CRD_APPLIERS) as pool:
        list(pool.map(kubectl.apply, crd_batches(docs)))  # kubectl.apply raises on a refusal, with kubectl's error
    kubectl.wait_established([d["metadata"]["name"] for d in docs])


def synth(stack_file: Path, out: Path) -> Path:
    """``gpuscale synth --stack-file F --out DIR``; returns ``DIR/manifests``."""
    gpuscale = Path(sys.executable).with_name("gpuscale")
    proc = subprocess.run([str(gpuscale), "synth", "--stack-file", str(stack_file), "--out", str(out)],
                          capture_output=True, text=True, check=False, timeout=600)
    if proc.returncode != 0:
        raise RuntimeError(f"gpuscale synth --stack-file {stack_file} failed ({proc.returncode}):\n{proc.stderr}")
    return out / "manifests"


def manifest_objects(manifests: Path) -> list[dict[str, Any]]:
    objects: list[dict[str, Any]] = []
    for path in sorted(manifests.glob("*.yaml")):
        objects += load_documents(path)
    return objects


def ref(obj: dict[str, Any]) -> str:
    meta = obj["metadata"]
    ns = f"{meta['namespace']}/" if meta.get("namespace") else ""
    return f"{obj['kind']} {ns}{meta['name']}"


@dataclass
class Verdict:
    objects: int = 0
    rejected: dict[str, str] = field(default_factory=dict)
    warnings: dict[str, list[str]] = field(default_factory=dict)
    changed_on_reapply: list[str] = field(default_factory=list)
    diffs: dict[str, str] = field(default_factory=dict)
    already_accepted: list[str] = field(default_factory=list)
    """Objects skipped because the live object was last applied, accepted and found idempotent with exactly this
    content (``accept``'s ``last_accepted``)."""

    @property
    def passed(self) -> bool:
        return self.objects > 0 and not (self.rejected or self.warnings or self.changed_on_reapply)

    def as_dict(self) -> dict[str, Any]:
        return {"objects": self.objects, "rejected": self.rejected, "warnings": self.warnings,
                "changed_on_reapply": self.changed_on_reapply, "diffs": self.diffs,
                "already_accepted": len(self.already_accepted)}


def digest(obj: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True).encode()).hexdigest()


class ApplyAndDiff(Protocol):
    """What ``accept`` needs of kubectl."""

    def apply(self, objects: Iterable[Mapping[str, Any]], *, check: bool = True, force: bool = True) -> Result: ...

    def diff(self, obj: Mapping[str, Any]) -> str: ...


def accept(kubectl: ApplyAndDiff, objects: Sequence[dict[str, Any]],
           last_accepted: dict[str, str] | None = None) -> Verdict:
    """Apply each object (namespaces first, so each rejection names its object), then diff each accepted one.

    ``last_accepted`` (object reference -> content digest), when given, is read and updated: an object whose live
    copy was last applied with exactly this content, and then passed, is not applied again. A grid of stacks that
    share most of their objects so pays for each distinct object once; an object whose content changed since is
    applied and judged again."""
    verdict = Verdict(objects=len(objects))
    ordered = sorted(objects, key=lambda o: (o["kind"] != "Namespace", o["kind"] != "CustomResourceDefinition"))
    todo = []
    for obj in ordered:
        if last_accepted is not None and last_accepted.get(ref(obj)) == digest(obj):
            verdict.already_accepted.append(ref(obj))
            continue
        if last_accepted is not None:
            last_accepted.pop(ref(obj), None)
        todo.append(obj)
    # all at once first (one kubectl process, minutes saved on a loaded machine); kubectl's warnings do not name the
    # object, so a rejection or a warning in the batch sends every object through again one by one
    batch = kubectl.apply(todo, check=False, force=False) if todo else None
    accepted = todo
    if batch is not None and (batch.returncode != 0 or batch.warnings):
        accepted = []
        for obj in todo:
            result = kubectl.apply([obj], check=False, force=False)
            if result.returncode != 0:
                verdict.rejected[ref(obj)] = result.stderr.strip()
                continue
            if result.warnings:
                verdict.warnings[ref(obj)] = result.warnings
            accepted.append(obj)
    # likewise one diff of everything, then one per object only when something would change
    changed = accepted if accepted and kubectl.diff(_list(accepted)) else []
    for obj in accepted:
        diff = kubectl.diff(obj) if obj in changed else ""
        if diff:
            verdict.changed_on_reapply.append(ref(obj))
            verdict.diffs[ref(obj)] = diff[:4000]
        elif last_accepted is not None and ref(obj) not in verdict.warnings:
            last_accepted[ref(obj)] = digest(obj)
    return verdict


def _list(objects: Sequence[dict[str, Any]]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "List", "items": list(objects)}


def remove(kubectl: Kubectl, objects: Sequence[dict[str, Any]], *, wait: bool = False) -> str:
    """Delete what an acceptance run applied but namespaces and CRDs (one kubectl call), so that no workload or
    autoscaler is left for the controller scenarios that follow; returns kubectl's error, empty when none."""
    doomed = [o for o in objects if o["kind"] not in ("Namespace", "CustomResourceDefinition")]
    if not doomed:
        return ""
    result = kubectl.run(["delete", "-f", "-", "--ignore-not-found", f"--wait={str(wait).lower()}", "--timeout=180s"],
                         stdin=json.dumps(_list(doomed)), check=False, timeout_s=240)
    return "" if result.returncode == 0 else result.stderr.strip()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m e2e.acceptance", description=__doc__.split("\n\n")[0])
    parser.add_argument("--stack-file", type=Path, required=True)
    parser.add_argument("--out", type=Path, default=REPO / "out" / "e2e" / "apply")
    args = parser.parse_args(argv)
    if not args.stack_file.is_file():
        print(f"error: {args.stack_file}: no such stack file", file=sys.stderr)
        return 2
    if not SHARED_CRDS.is_dir():
        print(f"error: {SHARED_CRDS} (the pinned upstream CRDs) is absent", file=sys.stderr)
        return 2
    from e2e.build import BuildError, build
    from e2e.controlplane import ControlPlane
    from e2e.processes import StartError, Supervisor
    from gpuscale.versions import E2E_ETCD, E2E_KUBERNETES

    try:
        for pin in (E2E_ETCD, E2E_KUBERNETES):
            build(pin)
    except BuildError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="gpuscale-e2e-apply-") as tmp:
        supervisor = Supervisor(Path(tmp) / "logs")
        try:
            plane = ControlPlane(supervisor, Path(tmp) / "cluster")
            plane.start(controllers=False)
            assert plane.kubeconfig is not None
            kubectl = Kubectl(plane.kubeconfig)
            install_crds(kubectl, crd_documents())
            objects = manifest_objects(synth(args.stack_file, Path(tmp) / "synth"))
            verdict = accept(kubectl, objects)
        except (StartError, RuntimeError) as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        finally:
            supervisor.stop()
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "verdict.json").write_text(json.dumps(verdict.as_dict(), indent=2) + "\n", encoding="utf-8")
    for name, message in verdict.rejected.items():
        print(f"rejected: {name}: {message}")
    for name, warnings in verdict.warnings.items():
        for warning in warnings:
            print(f"warning: {name}: {warning}")
    for name in verdict.changed_on_reapply:
        print(f"changed on re-apply: {name}")
    print(f"{args.stack_file}: {verdict.objects} objects, {len(verdict.rejected)} rejected, "
          f"{len(verdict.warnings)} with warnings, {len(verdict.changed_on_reapply)} changed on re-apply")
    return 0 if verdict.passed else 1


if __name__ == "__main__":
    raise SystemExit(main())
