"""``gpuscale versions``: every pin with its upstream release, checked against the release lists in ``gpuscale/upstream``;
with ``--check-aws``, each AMI alias resolved through SSM the way Karpenter resolves it (needs AWS credentials)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Callable
from typing import Annotated

import typer
from rich.table import Table

from gpuscale import versions
from gpuscale.cli.common import StackFileOpt, StackOpt, console, fail, positive_finite, spec_from_options

ParameterGetter = Callable[[str], str | None]
"""SSM parameter name -> its value (an AMI id), ``None`` when the parameter does not exist."""


class AwsUnavailableError(RuntimeError):
    """No way to ask AWS (neither boto3 nor the aws CLI), no credentials, or no answer in time."""


SSM_TIMEOUT_S = 20.0
"""Default of ``--aws-timeout-s``: how long one SSM lookup may take (connecting and answering) before it is given up
(boto3 and the aws CLI would otherwise wait 60 s per attempt and retry)."""


def _no_answer(name: str, timeout_s: float) -> AwsUnavailableError:
    return AwsUnavailableError(
        f"SSM did not answer for {name} within {timeout_s:g} s (--aws-timeout-s); check the network, the region and "
        "AWS_ENDPOINT_URL / AWS_ENDPOINT_URL_SSM if set"
    )


def ami_ssm_parameter(kubernetes_version: str, release: str, arch: str = "x86_64", variant: str = "nvidia") -> str:
    """The SSM parameter Karpenter v1.14.1 reads for ``al2023@<release>`` (``pkg/providers/amifamily/al2023.go``
    ``resolvePath``); GPU instance types use the ``nvidia`` variant."""
    name = "recommended" if release == "latest" else f"amazon-eks-node-al2023-{arch}-{variant}-{kubernetes_version}-{release}"
    return f"/aws/service/eks/optimized-ami/{kubernetes_version}/amazon-linux-2023/{arch}/{variant}/{name}/image_id"


def pin_rows() -> list[tuple[str, str, str, str, str]]:
    """(pin, kind, version, upstream release, release-list check) for every chart, image, AMI and Kubernetes pin."""
    known = versions.upstream_releases()
    rows: list[tuple[str, str, str, str, str]] = []
    for kind, pins in (("chart", versions.ALL_CHARTS), ("image", versions.ALL_IMAGES)):
        for name, pin in pins.items():
            version = pin.version if kind == "chart" else pin.tag  # type: ignore[union-attr]
            entry = known.get(f"{kind}s.{name}")
            if entry is not None and version in entry["releases"]:
                check = f"in {entry['upstream']} releases (newest listed {entry['releases'][-1]})"
            else:
                check = "NOT in the release list"
            rows.append((name, kind, version, pin.upstream_release, check))
    release = versions.ami_release(versions.EKS_AL2023_AMI_ALIAS)
    minors = versions.eks_ami_releases().get(release)
    rows.append((
        "eks-al2023-ami", "ami", versions.EKS_AL2023_AMI_ALIAS, f"awslabs/amazon-eks-ami {release}",
        f"NVIDIA AMI for Kubernetes {' '.join(sorted(minors, key=versions.minor))}" if minors else "NOT a known release",
    ))
    for k8s, ends in versions.EKS_STANDARD_SUPPORT_ENDS.items():
        default = " (default)" if k8s == versions.DEFAULT_KUBERNETES_VERSION else ""
        rows.append((
            f"kubernetes{default}", "eks", k8s, f"EKS standard support until {ends.isoformat()}",
            f"Karpenter {versions.KARPENTER.version} supports {'-'.join(versions.KARPENTER_KUBERNETES_RANGE)}",
        ))
    return rows


def boto3_getter(region: str, timeout_s: float = SSM_TIMEOUT_S) -> ParameterGetter:
    import boto3  # optional extra: pip install 'gpuscale[aws]'
    from botocore.config import Config
    from botocore.exceptions import (
        BotoCoreError,
        ClientError,
        ConnectTimeoutError,
        NoCredentialsError,
        ReadTimeoutError,
    )

    # one attempt, each phase bounded: the whole lookup takes at most about the timeout
    config = Config(connect_timeout=timeout_s / 2, read_timeout=timeout_s / 2, retries={"total_max_attempts": 1})
    client = boto3.client("ssm", region_name=region, config=config)

    def get(name: str) -> str | None:
        try:
            return str(client.get_parameter(Name=name)["Parameter"]["Value"])
        except client.exceptions.ParameterNotFound:
            return None
        except NoCredentialsError as exc:
            raise AwsUnavailableError(f"no AWS credentials: {exc}") from None
        except ClientError as exc:
            raise AwsUnavailableError(f"SSM refused {name}: {exc}") from None
        except (ConnectTimeoutError, ReadTimeoutError):
            raise _no_answer(name, timeout_s) from None
        except BotoCoreError as exc:  # no route, DNS, TLS: botocore says which
            raise AwsUnavailableError(f"cannot reach SSM for {name}: {exc}") from None

    return get


def cli_getter(region: str, aws: str, timeout_s: float = SSM_TIMEOUT_S) -> ParameterGetter:
    def get(name: str) -> str | None:
        bound = f"{max(int(timeout_s / 2), 1)}"
        try:
            done = subprocess.run(
                [aws, "ssm", "get-parameter", "--name", name, "--region", region, "--output", "json",
                 "--cli-connect-timeout", bound, "--cli-read-timeout", bound],
                capture_output=True, text=True, check=False, timeout=timeout_s, stdin=subprocess.DEVNULL,
                env={**os.environ, "AWS_MAX_ATTEMPTS": "1"},
            )
        except subprocess.TimeoutExpired:
            raise _no_answer(name, timeout_s) from None
        except OSError as exc:
            raise AwsUnavailableError(f"cannot run {aws}: {exc.strerror or exc}") from None
        if done.returncode == 0:
            try:
                return str(json.loads(done.stdout)["Parameter"]["Value"])
            except (ValueError, KeyError, TypeError):
                raise AwsUnavailableError(f"{aws} ssm get-parameter {name}: not the JSON the aws CLI writes") from None
        if "ParameterNotFound" in done.stderr:
            return None
        raise AwsUnavailableError(f"aws ssm get-parameter {name}: {done.stderr.strip() or done.returncode}")

    return get


def aws_getter(region: str, timeout_s: float = SSM_TIMEOUT_S) -> ParameterGetter:
    """boto3 when installed, else the aws CLI; ``AwsUnavailableError`` when neither is there."""
    try:
        return boto3_getter(region, timeout_s)
    except ImportError:
        pass
    aws = shutil.which("aws")
    if aws is None:
        raise AwsUnavailableError("--check-aws needs boto3 (pip install 'gpuscale[aws]') or the aws CLI on PATH")
    return cli_getter(region, aws, timeout_s)


def check_amis(aliases: list[str], kubernetes_versions: list[str], get: ParameterGetter) -> list[tuple[str, str, str, str]]:
    """(alias, Kubernetes version, SSM parameter, AMI id or ``missing``) for every al2023 alias and version."""
    out = []
    for alias in aliases:
        if not alias.startswith("al2023@"):
            continue
        for k8s in kubernetes_versions:
            parameter = ami_ssm_parameter(k8s, versions.ami_release(alias))
            out.append((alias, k8s, parameter, get(parameter) or "missing"))
    return out


def versions_command(
    stack: StackOpt = None,
    stack_file: StackFileOpt = None,
    check_aws: Annotated[bool, typer.Option(
        "--check-aws", help="Resolve each AMI alias through SSM as Karpenter does (needs AWS credentials).",
    )] = False,
    region: Annotated[str | None, typer.Option("--region", help="Region for --check-aws (default: the stack's).")] = None,
    aws_timeout_s: Annotated[float, typer.Option(
        "--aws-timeout-s", help="Seconds each SSM lookup of --check-aws may take.", callback=positive_finite,
    )] = SSM_TIMEOUT_S,
) -> None:
    """Print every pinned chart, image, AMI and Kubernetes version with the upstream release it matches."""
    table = Table(title="Pinned upstream versions")
    for col in ("pin", "kind", "version", "upstream release", "checked"):
        table.add_column(col)
    rows = pin_rows()
    for row in rows:
        table.add_row(*row)
    console.print(table)
    aliases, k8s_versions = [versions.EKS_AL2023_AMI_ALIAS], list(versions.SUPPORTED_KUBERNETES_VERSIONS)
    if stack is not None or stack_file is not None:
        spec = spec_from_options(stack, stack_file)
        aliases = sorted({versions.EKS_AL2023_AMI_ALIAS, *(p.ami_alias for p in spec.topology.gpu_pools)})
        k8s_versions = [spec.environment.kubernetes_version]
        region = region or spec.environment.aws_region
    unlisted = [r[0] for r in rows if r[4].startswith("NOT")]
    if unlisted:
        fail([f"{', '.join(unlisted)}: pinned version not in the upstream release list (gpuscale/upstream/)"])
    if not check_aws:
        return
    if region is None:
        fail(["--check-aws needs --region, or --stack/--stack-file to take the stack's region"])
    try:
        results = check_amis(aliases, k8s_versions, aws_getter(region, aws_timeout_s))
    except AwsUnavailableError as exc:
        fail([str(exc)])
    ssm = Table(title=f"AMI aliases resolved through SSM in {region}")
    for col in ("alias", "kubernetes", "SSM parameter", "image id"):
        ssm.add_column(col)
    for result in results:
        ssm.add_row(*result)
    console.print(ssm)
    missing = [f"{a} for Kubernetes {k}" for a, k, _, image in results if image == "missing"]
    if missing:
        fail([f"no SSM parameter for {m}: Karpenter would find no AMI and launch no node" for m in missing])

