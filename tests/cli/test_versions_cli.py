"""``gpuscale versions``: every pin with its upstream release; ``--check-aws`` resolves AMI aliases as Karpenter does."""

from __future__ import annotations

from typer.testing import CliRunner

from gpuscale import versions
from gpuscale.cli import app
from gpuscale.cli.versions import ami_ssm_parameter, check_amis, pin_rows

runner = CliRunner()


def test_every_pin_is_printed_with_its_upstream_release_and_checked() -> None:
    result = runner.invoke(app, ["versions"])
    assert result.exit_code == 0, result.output
    rows = {row[0]: row for row in pin_rows()}
    assert set(versions.ALL_CHARTS) | set(versions.ALL_IMAGES) <= set(rows)
    assert all(not row[4].startswith("NOT") for row in rows.values())
    assert rows["eks-al2023-ami"][2] == versions.EKS_AL2023_AMI_ALIAS
    for name in ("karpenter", "aws-efa-k8s-device-plugin", "vllm", "eks-al2023-ami"):
        assert name in result.output


def test_an_unlisted_pin_fails_the_command(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    bumped = versions.KEDA.model_copy(update={"version": "2.99.0"})
    monkeypatch.setattr(versions, "ALL_CHARTS", {**versions.ALL_CHARTS, "keda": bumped})
    result = runner.invoke(app, ["versions"])
    assert result.exit_code == 2 and "keda: pinned version not in the upstream release list" in result.output


def test_ssm_parameter_is_the_one_karpenter_resolves() -> None:
    # aws/karpenter-provider-aws v1.14.1 pkg/providers/amifamily/al2023.go resolvePath
    assert ami_ssm_parameter("1.36", "v20260714") == (
        "/aws/service/eks/optimized-ami/1.36/amazon-linux-2023/x86_64/nvidia/"
        "amazon-eks-node-al2023-x86_64-nvidia-1.36-v20260714/image_id"
    )
    assert ami_ssm_parameter("1.36", "latest").endswith("/x86_64/nvidia/recommended/image_id")


def test_check_amis_reports_each_alias_and_version_and_skips_other_families() -> None:
    seen: list[str] = []

    def fake_ssm(name: str) -> str | None:  # stands in for SSM: only the 1.36 parameter exists
        seen.append(name)
        return "ami-0123" if "-1.36-" in name else None

    out = check_amis(["al2023@v20260714", "bottlerocket@v1.30.0"], ["1.35", "1.36"], fake_ssm)
    assert [(a, k, image) for a, k, _, image in out] == [
        ("al2023@v20260714", "1.35", "missing"), ("al2023@v20260714", "1.36", "ami-0123"),
    ]
    assert len(seen) == 2
