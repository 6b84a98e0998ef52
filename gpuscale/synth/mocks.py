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
from pulumi.runtime import mocks as _mocks
from pulumi.runtime.stack import run_pulumi_func
from pulumi.runtime.sync_await import _sync_await

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
    acct = ACCOUNT_ID
    if typ == "aws:iam/role:Role":
        return {"arn": f"arn:aws:iam::{acct}:role/{name}", "name": name, "uniqueId": f"AROA{_short_hash(name).upper()}"}
    if typ == "aws:iam/policy:Policy":
        return {"arn": f"arn:aws:iam::{acct}:policy/{name}", "name": name}
    if typ == "aws:iam/instanceProfile:InstanceProfile":
        return {"arn": f"arn:aws:iam::{acct}:instance-profile/{name}", "name": name}
    if typ == "aws:sqs/queue:Queue":
        return {"arn": f"arn:aws:sqs:{region}:{acct}:{name}", "name": name,
                "url": f"https://sqs.{region}.amazonaws.com/{acct}/{name}"}
    if typ == "aws:cloudwatch/eventRule:EventRule":
        return {"arn": f"arn:aws:events:{region}:{acct}:rule/{name}", "name": name}
    if typ == "aws:kms/key:Key":
        return {"arn": f"arn:aws:kms:{region}:{acct}:key/{rid}", "keyId": rid}
    if typ == "aws:eks/cluster:Cluster":
        return {
            "arn": f"arn:aws:eks:{region}:{acct}:cluster/{name}", "name": name,
            "endpoint": f"https://{_short_hash(name).upper()}.gr7.{region}.eks.amazonaws.com",
            "certificateAuthority": {"data": "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCnN5bnRoCi0tLS0tRU5EIENFUlRJRklDQVRFLS0tLS0K"},
            "identities": [{"oidcs": [{"issuer": f"https://oidc.eks.{region}.amazonaws.com/id/{_short_hash(name).upper()}"}]}],
            "version": "1.33", "clusterSecurityGroupId": f"sg-{_short_hash(name + 'csg')}",
            "vpcConfig": {"clusterSecurityGroupId": f"sg-{_short_hash(name + 'csg')}"},
        }
    if typ == "aws:ec2/vpc:Vpc":
        return {"arn": f"arn:aws:ec2:{region}:{acct}:vpc/vpc-{_short_hash(logical)}", "id": f"vpc-{_short_hash(logical)}"}
    if typ == "aws:ec2/subnet:Subnet":
        return {"arn": f"arn:aws:ec2:{region}:{acct}:subnet/subnet-{_short_hash(logical)}"}
    if typ == "aws:ec2/securityGroup:SecurityGroup":
        return {"arn": f"arn:aws:ec2:{region}:{acct}:security-group/sg-{_short_hash(logical)}"}
    if typ == "aws:eks/podIdentityAssociation:PodIdentityAssociation":
        return {"associationArn": f"arn:aws:eks:{region}:{acct}:podidentityassociation/{rid}", "associationId": rid}
    if typ == "aws:eks/accessEntry:AccessEntry":
        return {"accessEntryArn": f"arn:aws:eks:{region}:{acct}:access-entry/{rid}"}
    if typ in ("aws:eks/addon:Addon", "aws:eks/nodeGroup:NodeGroup"):
        return {"arn": f"arn:aws:eks:{region}:{acct}:{typ.split(':')[-1].lower()}/{rid}"}
    if typ.startswith("kubernetes:") and typ != "kubernetes:helm.sh/v4:Chart":
        return {}
    if typ == "kubernetes:helm.sh/v4:Chart":
        return {"resources": []}
    return {}


class RecordingMonitor(_mocks.MockMonitor):
    """A mock monitor that also keeps the parent and provider of each registration, in order."""

    def __init__(self, mocks: pulumi.runtime.Mocks) -> None:
        super().__init__(mocks)
        self.records: list[RecordedResource] = []

    def RegisterResource(self, request: Any) -> Any:  # noqa: N802 - gRPC method name
        response = super().RegisterResource(request)
        if request.type != "pulumi:pulumi:Stack":
            inputs = pulumi.runtime.rpc.deserialize_properties(request.object)
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
    mocks = DeterministicMocks(region)
    monitor = RecordingMonitor(mocks)
    pulumi.runtime.set_mocks(mocks, project=project, stack=stack, preview=preview, monitor=monitor)
    pulumi.runtime.settings.SETTINGS.rpc_manager.clear()
    pulumi.runtime.settings.SETTINGS.outputs.clear()

    def body() -> None:
        program()

    _sync_await(run_pulumi_func(body))
    return list(monitor.records)
