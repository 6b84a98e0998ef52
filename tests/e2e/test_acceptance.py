"""The real kube-apiserver accepts every object every shipped stack emits, warns about none, and a re-apply changes
nothing (``e2e.acceptance``)."""

from __future__ import annotations

from typing import Any

import pytest

from e2e.acceptance import accept, manifest_objects
from tests.conftest import STACKS


@pytest.mark.parametrize("stack", STACKS)
def test_apply_stack(stack: str, harness: Any, synth_dir: Any, scenario: Any) -> None:
    objects = manifest_objects(synth_dir(stack))
    kinds = sorted({o["kind"] for o in objects})
    verdict = accept(harness.kubectl, objects)
    scenario.observed.update(verdict.as_dict(), kinds=kinds)
    try:
        assert verdict.objects > 0
        assert not verdict.rejected, verdict.rejected
        assert not verdict.warnings, verdict.warnings
        assert not verdict.changed_on_reapply, verdict.changed_on_reapply
    finally:
        # leave no workload or autoscaler behind for the controller scenarios (namespaces and CRDs stay)
        for obj in objects:
            if obj["kind"] not in ("Namespace", "CustomResourceDefinition"):
                meta = obj["metadata"]
                harness.kubectl.run(["delete", f"{obj['kind']}.{obj['apiVersion'].split('/')[0]}"
                                     if "/" in obj["apiVersion"] else obj["kind"], meta["name"],
                                     *(["-n", meta["namespace"]] if meta.get("namespace") else []),
                                     "--ignore-not-found", "--wait=false"], check=False)

