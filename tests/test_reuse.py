"""Another Pulumi program can pip-install gpuscale and use its components (wheel in a fresh venv, outside the repo)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO

DRIVER = r"""
import json, runpy, sys
import gpuscale
from gpuscale.synth.mocks import run_program
records = run_program(lambda: runpy.run_path(sys.argv[1]), region="eu-west-1", stack="reuse")
print(json.dumps({
    "gpuscale": gpuscale.__file__,
    "types": sorted({r.type for r in records}),
    "nodepool": next(r.inputs for r in records if r.type == "kubernetes:karpenter.sh/v1:NodePool"),
    "deployment": next(r.inputs for r in records if r.type == "kubernetes:apps/v1:Deployment"),
    "providers": sorted({r.provider.split("::")[-2] for r in records if r.type.startswith("kubernetes:")}),
}))
"""


@pytest.mark.slow
def test_wheel_installs_and_components_work_from_another_program(tmp_path: Path) -> None:
    dist = tmp_path / "dist"
    subprocess.run([sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", str(dist), str(REPO)],
                   check=True, capture_output=True)
    (wheel,) = dist.glob("gpuscale-*.whl")
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    py = venv / "bin" / "python"
    subprocess.run([str(py), "-m", "pip", "install", "--quiet", str(wheel)], check=True, capture_output=True)
    work = tmp_path / "elsewhere"
    work.mkdir()
    program = shutil.copy(REPO / "examples" / "own_program.py", work / "__main__.py")
    (work / "driver.py").write_text(DRIVER)
    out = subprocess.run([str(py), "driver.py", str(program)], cwd=work, check=True, capture_output=True, text=True)
    result = json.loads(out.stdout.strip().splitlines()[-1])

    assert result["gpuscale"].startswith(str(venv))  # the installed wheel, not the repo
    assert {"gpuscale:index:GpuNodePool", "gpuscale:index:VllmService"} <= set(result["types"])
    disruption = result["nodepool"]["spec"]["disruption"]
    assert (disruption["consolidationPolicy"], disruption["consolidateAfter"]) == ("WhenEmpty", "1h")
    pod = result["deployment"]["spec"]["template"]["spec"]
    assert pod["schedulerName"] == "kai-scheduler"
    assert pod["containers"][0]["image"].startswith("vllm/vllm-openai:")
    assert result["providers"] == ["existing-cluster"]  # every Kubernetes object uses the caller's provider
    templates = subprocess.run([str(py), "-c", "import gpuscale.templates, pathlib; print(sorted(p.name for p in pathlib.Path(gpuscale.templates.__file__).parent.glob('*.j2')))"],
                               cwd=work, check=True, capture_output=True, text=True)
    assert "skill-gpu-autoscaler-plan.md.j2" in templates.stdout
    go_module = subprocess.run([str(py), "-c", "import json, gpuscale.schedule.binary as b; print(json.dumps([p.name for p in b.source_files()]))"],
                               cwd=work, check=True, capture_output=True, text=True)
    assert {"go.mod", "go.sum", "main.go"} <= set(json.loads(go_module.stdout))  # `gpuscale schedule` can build from a wheel
