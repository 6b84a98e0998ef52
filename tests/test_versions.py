"""Every pin in gpuscale/versions.py is a real upstream release, and the AMI, chart and Kubernetes pins agree."""

from __future__ import annotations

import datetime

import pytest
from pydantic import ValidationError

from gpuscale import versions
from gpuscale.spec.environment import EnvironmentSpec
from tests.specs import environment


@pytest.mark.parametrize(("kind", "name"), [*(("charts", n) for n in versions.ALL_CHARTS),
                                            *(("images", n) for n in versions.ALL_IMAGES)])
def test_every_chart_and_image_pin_is_an_upstream_release(kind: str, name: str) -> None:
    entry = versions.upstream_releases()[f"{kind}.{name}"]
    pin = versions.ALL_CHARTS[name].version if kind == "charts" else versions.ALL_IMAGES[name].tag
    assert pin in entry["releases"], f"{name} {pin} is not in the {entry['upstream']} release list"
    assert entry["upstream"] and entry["source"]  # provenance: where the list was read


def test_the_ami_pin_is_a_release_with_the_nvidia_ami_for_every_supported_kubernetes_version() -> None:
    release = versions.ami_release(versions.EKS_AL2023_AMI_ALIAS)
    minors = versions.eks_ami_releases()[release]
    assert minors is not None, f"{release} has no CHANGELOG entry: its Kubernetes minors are unknown"
    assert set(versions.SUPPORTED_KUBERNETES_VERSIONS) <= minors


def test_the_issue_s_ami_pin_is_not_a_release() -> None:
    # al2023@v20251117 never existed (v20251112 and v20251120 do): Karpenter found no SSM parameter for it
    known = versions.eks_ami_releases()
    assert "v20251117" not in known and {"v20251112", "v20251120"} <= set(known)


def test_release_data_files_name_their_upstream_and_check_date() -> None:
    from importlib import resources

    for name in ("eks_ami_releases.tsv", "releases.toml"):
        head = resources.files("gpuscale").joinpath(f"upstream/{name}").read_text().splitlines()[:8]
        text = "\n".join(head)
        assert "Checked: 2026-11-30" in text, name
    assert "awslabs/amazon-eks-ami" in resources.files("gpuscale").joinpath("upstream/eks_ami_releases.tsv").read_text()


def test_supported_kubernetes_versions_are_what_karpenter_supports_and_the_default_is_the_newest() -> None:
    low, high = (versions.minor(v) for v in versions.KARPENTER_KUBERNETES_RANGE)
    assert all(low <= versions.minor(v) <= high for v in versions.SUPPORTED_KUBERNETES_VERSIONS)
    assert max(versions.SUPPORTED_KUBERNETES_VERSIONS, key=versions.minor) == versions.DEFAULT_KUBERNETES_VERSION
    assert versions.minor(versions.DEFAULT_KUBERNETES_VERSION) == high
    assert EnvironmentSpec.model_validate(environment()).kubernetes_version == versions.DEFAULT_KUBERNETES_VERSION


@pytest.mark.parametrize("version", ["1.33", "1.31", "1.37"])
def test_versions_outside_standard_support_or_karpenter_are_refused(version: str) -> None:
    with pytest.raises(ValidationError, match="EKS standard support"):
        EnvironmentSpec.model_validate({**environment(), "kubernetes_version": version})


def test_a_version_is_refused_once_its_standard_support_has_ended(monkeypatch: pytest.MonkeyPatch) -> None:
    # both sides of the end date are fixed: the test must not depend on the day it runs (it read the real date once,
    # and failed from 2026-12-03 on, while the product was right to refuse)
    monkeypatch.setattr(versions, "today", lambda: datetime.date(2026, 12, 2))
    EnvironmentSpec.model_validate({**environment(), "kubernetes_version": "1.34"})  # its last day of support
    monkeypatch.setattr(versions, "today", lambda: datetime.date(2026, 12, 3))
    with pytest.raises(ValidationError, match=r"1\.34' left EKS standard support on 2026-12-02.*use 1\.35, 1\.36"):
        EnvironmentSpec.model_validate({**environment(), "kubernetes_version": "1.34"})
    assert EnvironmentSpec.model_validate({**environment(), "kubernetes_version": "1.35"}).kubernetes_version == "1.35"
