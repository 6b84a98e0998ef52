"""Deterministic Pulumi mocks: the engine tests and the offline synth run programs against.

Every resource gets a stable id and the computed outputs that downstream code reads (ARNs, names,
cluster endpoint, kubeconfig inputs), so two runs of the same program produce identical records.
The monitor also records each registration's parent, which ``MockResourceArgs`` does not carry.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pulumi

from gpuscale import pulumi_runtime

ACCOUNT_ID = "123456789012"
"""The account id mocks report (an AWS documentation example id)."""


@dataclass
class RecordedResource:
    """One resource registration as the engine would have received it."""

    urn: str
    type: str
    name: str
    parent_urn: str
    custom: bool
    inputs: dict[str, Any]
    provider: str = ""
    dependencies: list[str] = field(default_factory=list)


class DeterministicMocks(pulumi.runtime.Mocks):
    """Answers resources and invokes with stable, plausible values for an AWS region."""

    def __init__(self, region: str = "us-east-1") -> None:
        self.region = region

    def new_resource(self, args: pulumi.runtime.MockResourceArgs) -> tuple[str | None, dict[str, Any]]:
        name = args.inputs.get("name") or args.name
        rid = f"{args.name}-{_short_hash(args.typ + args.name)}"
        state: dict[str, Any] = {**args.inputs, **_computed(args.typ, args.name, str(name), rid, self.region)}
        return rid, state

    def call(self, args: pulumi.runtime.MockCallArgs) -> tuple[dict[str, Any], list[tuple[str, str]]]:
        # the SDK's MockMonitor iterates the failures of a tuple answer, so None must become []
        result, failures = self._answer(args)
        return result, failures or []

    def _answer(self, args: pulumi.runtime.MockCallArgs) -> tuple[dict[str, Any], list[tuple[str, str]] | None]:
        tok, a = args.token, args.args
        if tok == "aws:index/getCallerIdentity:getCallerIdentity":
            return {"accountId": ACCOUNT_ID, "arn": f"arn:aws:iam::{ACCOUNT_ID}:user/synth", "id": ACCOUNT_ID,
                    "userId": "AIDASYNTH"}, None
        if tok == "aws:index/getRegion:getRegion":
            return {"region": self.region, "name": self.region, "id": self.region,
                    "endpoint": f"ec2.{self.region}.amazonaws.com", "description": self.region}, None
        if tok == "aws:index/getPartition:getPartition":
            return {"partition": "aws", "dnsSuffix": "amazonaws.com", "reverseDnsPrefix": "com.amazonaws",
                    "id": "aws"}, None
        if tok == "aws:index/getAvailabilityZones:getAvailabilityZones":
            names = [f"{self.region}{z}" for z in "abc"]
            return {"names": names, "zoneIds": [f"use1-az{i}" for i in (1, 2, 3)], "id": self.region,
                    "state": "available", "groupNames": [self.region]}, None
        if tok == "aws:eks/getAddonVersion:getAddonVersion":
            return {"addonName": a.get("addonName"), "kubernetesVersion": a.get("kubernetesVersion"),
                    "mostRecent": a.get("mostRecent", False), "version": "v0.0.0-synth", "id": a.get("addonName")}, None
        if tok == "aws:ssm/getParameter:getParameter":
            return {"name": a.get("name"), "value": "synth", "insecureValue": "synth", "type": "String",
                    "version": 1, "arn": f"arn:aws:ssm:{self.region}:{ACCOUNT_ID}:parameter{a.get('name')}"}, None
        return {}, None


def _short_hash(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:8]


def _computed(typ: str, logical: str, name: str, rid: str, region: str) -> dict[str, Any]:
    """Outputs a provider would compute, keyed by wire (camelCase) names."""
    if typ == "aws:eks/cluster:Cluster":
        return _eks_cluster(name, region)
    if typ in _ARNS:
        return _ARNS[typ](logical, name, rid, region)
    if typ == "kubernetes:helm.sh/v4:Chart":
        return {"resources": []}
    return {}


def _arn(service: str, region: str, rest: str) -> str:
    return f"arn:aws:{service}:{region}:{ACCOUNT_ID}:{rest}"


_Computed = Callable[[str, str, str, str], dict[str, Any]]
_ARNS: dict[str, _Computed] = {
    "aws:iam/role:Role": lambda lg, n, rid, r: {"arn": _arn("iam", "", f"role/{n}"), "name": n, "uniqueId": f"AROA{_short_hash(n).upper()}"},
    "aws:iam/policy:Policy": lambda lg, n, rid, r: {"arn": _arn("iam", "", f"policy/{n}"), "name": n},
    "aws:iam/instanceProfile:InstanceProfile": lambda lg, n, rid, r: {"arn": _arn("iam", "", f"instance-profile/{n}"), "name": n},
    "aws:sqs/queue:Queue": lambda lg, n, rid, r: {
        "arn": _arn("sqs", r, n), "name": n, "url": f"https://sqs.{r}.amazonaws.com/{ACCOUNT_ID}/{n}"},
    "aws:cloudwatch/eventRule:EventRule": lambda lg, n, rid, r: {"arn": _arn("events", r, f"rule/{n}"), "name": n},
    "aws:kms/key:Key": lambda lg, n, rid, r: {"arn": _arn("kms", r, f"key/{rid}"), "keyId": rid},
    "aws:ec2/vpc:Vpc": lambda lg, n, rid, r: {"arn": _arn("ec2", r, f"vpc/vpc-{_short_hash(lg)}"), "id": f"vpc-{_short_hash(lg)}"},
    "aws:ec2/subnet:Subnet": lambda lg, n, rid, r: {"arn": _arn("ec2", r, f"subnet/subnet-{_short_hash(lg)}")},
    "aws:ec2/securityGroup:SecurityGroup": lambda lg, n, rid, r: {"arn": _arn("ec2", r, f"security-group/sg-{_short_hash(lg)}")},
    "aws:eks/podIdentityAssociation:PodIdentityAssociation": lambda lg, n, rid, r: {
        "associationArn": _arn("eks", r, f"podidentityassociation/{rid}"), "associationId": rid},
    "aws:eks/accessEntry:AccessEntry": lambda lg, n, rid, r: {"accessEntryArn": _arn("eks", r, f"access-entry/{rid}")},
    "aws:eks/addon:Addon": lambda lg, n, rid, r: {"arn": _arn("eks", r, f"addon/{rid}")},
    "aws:eks/nodeGroup:NodeGroup": lambda lg, n, rid, r: {"arn": _arn("eks", r, f"nodegroup/{rid}")},
}


def _eks_cluster(name: str, region: str) -> dict[str, Any]:
    tag = _short_hash(name).upper()
    sg = f"sg-{_short_hash(name + 'csg')}"
    return {
        "arn": _arn("eks", region, f"cluster/{name}"), "name": name,
        "endpoint": f"https://{tag}.gr7.{region}.eks.amazonaws.com",
        "certificateAuthority": {"data": "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCnN5bnRoCi0tLS0tRU5EIENFUlRJRklDQVRFLS0tLS0K"},
        "identities": [{"oidcs": [{"issuer": f"https://oidc.eks.{region}.amazonaws.com/id/{tag}"}]}],
        "version": "1.33", "clusterSecurityGroupId": sg, "vpcConfig": {"clusterSecurityGroupId": sg},
    }


class RecordingMonitor(pulumi_runtime.MockMonitor):  # type: ignore[misc]
    """A mock monitor that also keeps the parent and provider of each registration, in order."""

    def __init__(self, mocks: pulumi.runtime.Mocks) -> None:
        super().__init__(mocks)
        self.records: list[RecordedResource] = []

    def RegisterResource(self, request: Any) -> Any:
        response = super().RegisterResource(request)
        if request.type != "pulumi:pulumi:Stack":
            inputs = pulumi_runtime.deserialize(request.object)
            self.records.append(RecordedResource(
                urn=response.urn, type=request.type, name=request.name, parent_urn=request.parent,
                custom=bool(request.custom), inputs=inputs, provider=request.provider,
                dependencies=list(request.dependencies),
            ))
        return response


def run_program(
    program: Callable[[], object], *, project: str = "gpuscale", stack: str = "synth", region: str = "us-east-1",
    preview: bool = False,
) -> list[RecordedResource]:
    """Run ``program`` under deterministic mocks and return every resource it registered, in order.

    Exceptions raised by the program (or inside ``apply``) propagate after the runtime settles.
    """
    pulumi_runtime.check_sdk()
    mocks = DeterministicMocks(region)
    monitor = RecordingMonitor(mocks)
    pulumi_runtime.install_mocks(mocks, monitor, project=project, stack=stack, preview=preview)
    pulumi_runtime.run_to_completion(program)
    return list(monitor.records)
