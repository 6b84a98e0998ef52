"""Another Pulumi program can install gpuscale's wheel and use its components and its policy pack.

The wheel is built once per test session from a copy of the sources (no stale ``build/`` from the checkout), installed
with ``--no-deps`` into a fresh virtualenv created without pip, and the already-installed dependencies are reached
through a ``.pth`` file written after the install (so pip never sees, or touches, the development environment). The
programs and the pack run from a directory outside the repository, so ``gpuscale`` can only come from the wheel.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest
import yaml

from tests.conftest import REPO

SOURCES = ("pyproject.toml", "README.md", "gpuscale", "components", "templates")

DRIVER = r"""
import json, runpy, sys
import gpuscale
import gpuscale.templates
from gpuscale.synth.mocks import run_program
from gpuscale.policy import pack_dir

def program(path):
    return lambda: runpy.run_path(path)

out = {"gpuscale": gpuscale.__file__, "templates": gpuscale.templates.__file__, "programs": {}}
for path in sys.argv[1:]:
    records = run_program(program(path), project="example", region="eu-west-1", stack="reuse")
    out["programs"][path] = [
        {"type": r.type, "name": r.name, "inputs": r.inputs, "provider": r.provider, "urn": r.urn,
         "dependencies": r.dependencies}
        for r in records
    ]
pack = runpy.run_path(str(pack_dir()), run_name="gpuscale_policy_pack")  # as `python -m pulumi.policy <dir>`, no server
out["policies"] = sorted(p.name for p in pack["POLICIES"])
from gpuscale.schedule.binary import source_files
out["go_module"] = [p.name for p in source_files()]
print(json.dumps(out))
"""

CONFIG = {
    "example:kubeContext": "arn:aws:eks:eu-west-1:123456789012:cluster/team-a",
    "example:clusterName": "team-a",
    "example:nodeRoleName": "KarpenterNodeRole-team-a",
    "example:subnetIds": json.dumps(["subnet-0a1", "subnet-0b2"]),
    "example:prometheusUrl": "http://prometheus.monitoring.svc:9090",
}


@pytest.fixture(scope="session")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    src = tmp_path_factory.mktemp("src")
    for name in SOURCES:
        path = REPO / name
        if path.is_dir():
            shutil.copytree(path, src / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            shutil.copy(path, src / name)
    dist = tmp_path_factory.mktemp("dist")
    subprocess.run([sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", str(dist), str(src)],
                   check=True, capture_output=True)
    (built,) = dist.glob("gpuscale-*.whl")
    return built


@pytest.fixture(scope="session")
def venv(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    venv = tmp_path_factory.mktemp("venv")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", "--clear", str(venv)], check=True)
    python = venv / "bin" / "python"
    # pip runs inside the new interpreter: it sees only the empty venv, installs the wheel and its console script
    subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps", "--no-index",
                    "--quiet", "--disable-pip-version-check", str(wheel)], check=True, capture_output=True)
    site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                          check=True, capture_output=True, text=True).stdout.strip()
    # the dependencies already installed here (pulumi, pulumi-aws, pydantic, pulumi-policy ...), not re-downloaded
    (Path(site) / "_gpuscale_test_dependencies.pth").write_text(sysconfig.get_path("purelib") + "\n")
    return venv


@pytest.mark.slow
def test_the_wheel_serves_the_examples_and_the_policy_pack(venv: Path, tmp_path: Path) -> None:
    work = tmp_path / "elsewhere"
    work.mkdir()
    programs = []
    for example in ("own_program.py", "add_model.py"):
        folder = work / example.removesuffix(".py")
        folder.mkdir()
        programs.append(str(shutil.copy(REPO / "examples" / example, folder / "__main__.py")))
    (work / "driver.py").write_text(DRIVER)
    env = {**os.environ, "PULUMI_CONFIG": json.dumps(CONFIG)}
    env.pop("PYTHONPATH", None)
    # the console script runs beside the driver (two cores): `pulumi preview --policy-pack "$(gpuscale policy-path)"`
    command = subprocess.Popen([str(venv / "bin" / "gpuscale"), "policy-path"], cwd=work, env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    done = subprocess.run([str(venv / "bin" / "python"), "driver.py", *programs], cwd=work, env=env,
                          capture_output=True, text=True, check=False)
    path, errors = command.communicate(timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    assert command.returncode == 0, errors
    result = json.loads(done.stdout.strip().splitlines()[-1])

    assert result["gpuscale"].startswith(str(venv))  # the installed wheel, not the repository
    assert Path(result["templates"]).parent.joinpath("skill-gpu-autoscaler-plan.md.j2").is_file()

    pool_program = {r["type"]: r for r in result["programs"][programs[0]]}
    disruption = pool_program["kubernetes:karpenter.sh/v1:NodePool"]["inputs"]["spec"]["disruption"]
    assert (disruption["consolidationPolicy"], disruption["consolidateAfter"]) == ("WhenEmpty", "1h")
    node_class = pool_program["kubernetes:karpenter.k8s.aws/v1:EC2NodeClass"]["inputs"]["spec"]
    assert node_class["subnetSelectorTerms"] == [{"id": "subnet-0a1"}, {"id": "subnet-0b2"}]
    assert node_class["securityGroupSelectorTerms"] == [{"tags": {"karpenter.sh/discovery": "team-a"}}]
    assert node_class["role"] == "KarpenterNodeRole-team-a"

    model = result["programs"][programs[1]]
    kinds = {r["type"] for r in model}
    assert {"gpuscale:index:QueueTree", "gpuscale:index:VllmService", "gpuscale:index:RoleAutoscaler"} <= kinds
    (namespace,) = [r for r in model if r["type"] == "kubernetes:core/v1:Namespace"]
    (deployment,) = [r for r in model if r["type"] == "kubernetes:apps/v1:Deployment"]
    (scaler,) = [r for r in model if r["type"] == "kubernetes:keda.sh/v1alpha1:ScaledObject"]
    assert deployment["inputs"]["metadata"]["namespace"] == scaler["inputs"]["metadata"]["namespace"] == "team-b-llm"
    assert namespace["urn"] in deployment["dependencies"]  # the namespace Output carries the Namespace
    pod = deployment["inputs"]["spec"]["template"]["spec"]
    assert pod["schedulerName"] == "kai-scheduler" and pod["nodeSelector"] == {"gpuscale.io/node-pool": "l40s"}
    assert pod["containers"][0]["image"].startswith("vllm/vllm-openai:")
    (identity,) = [r for r in model if r["type"] == "aws:eks/podIdentityAssociation:PodIdentityAssociation"]
    assert identity["inputs"]["clusterName"] == "team-a" and identity["inputs"]["namespace"] == "team-b-llm"
    providers = {r["provider"].split("::")[-2] for r in model if r["type"].startswith("kubernetes:")}
    assert providers == {"existing-cluster"}  # every Kubernetes object uses the caller's provider

    # the policy pack ships in the wheel and loads with nothing but the package and pulumi-policy
    assert result["policies"] == sorted([
        "gpu-nodepool-consolidation", "autoscaler-metric", "autoscaler-role-scope", "gang-scheduling-multi-pod-gpu",
        "prod-ami-pinned", "one-autoscaler-per-workload", "hpa-min-replicas", "gpu-nodepool-patch-consolidation",
        "critical-warm-minimum",
    ])
    path = path.strip()
    assert path.startswith(str(venv)) and Path(path, "__main__.py").is_file()
    pack = yaml.safe_load(Path(path, "PulumiPolicy.yaml").read_text())
    assert pack["runtime"] == "python"  # no virtualenv pointing back into a checkout
    # `gpuscale schedule` can build its Go program from the wheel
    assert {"go.mod", "go.sum", "main.go"} <= set(result["go_module"])
