"""The EKS control plane, its network, a small system node group, the core add-ons, and a Kubernetes provider.

Plain pulumi-aws resources (not the remote ``pulumi_eks`` component, which cannot be expanded under mocks),
so every resource shows up in the synth and in tests.
"""

from __future__ import annotations

import functools
import hashlib
import json
from typing import Literal

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s
from pydantic import Field, model_validator

from gpuscale import labels, versions
from gpuscale.components.children import child_opts, claim
from gpuscale.components.inputs import NonEmpty, PrincipalArn, StrInput, SubnetIds, output_list
from gpuscale.components.kubernetes_provider import kubernetes_provider
from gpuscale.manifests import iam, network
from gpuscale.spec.base import Ipv4Cidr, Spec
from gpuscale.spec.environment import ExistingSubnetsSpec, NewVpcSpec
from gpuscale.spec.platform import PlatformSpec

CoreAddon = Literal["vpc-cni", "kube-proxy", "eks-pod-identity-agent", "coredns", "aws-ebs-csi-driver"]
ADDONS_BEFORE_NODES: tuple[CoreAddon, ...] = ("vpc-cni", "kube-proxy", "eks-pod-identity-agent")
"""DaemonSets a node needs to become Ready (networking, Pod Identity credentials): installed before any node."""
ADDONS_AFTER_NODES: tuple[CoreAddon, ...] = ("coredns", "aws-ebs-csi-driver")
"""Deployments that only become healthy once nodes exist (the EBS CSI driver provisions Prometheus' volume; EKS
creates no default StorageClass or CSI driver on new clusters)."""


class ExistingSubnets(Spec):
    """Subnets that already exist (a network stack's); EKS takes the VPC from them, nothing is created or tagged."""

    private_subnet_ids: SubnetIds
    """Private subnets for the control plane's interfaces and the system nodes (a list, or an Output of one). Give
    Karpenter's node pools the same ids (``subnet_ids``) or tag them ``karpenter.sh/discovery: <cluster>``."""


class EksClusterArgs(Spec):
    """What ``EksCluster`` builds: a named cluster, its network, endpoint access, admins, and the system nodes."""

    cluster_name: str = Field(pattern=r"^[0-9A-Za-z][A-Za-z0-9\-_]{0,99}$")
    """Name of the EKS cluster to create (also the Karpenter discovery tag value and in the KMS alias)."""
    zones: list[str] = Field(min_length=1, max_length=network.MAX_ZONES)
    """Availability zones; a new VPC gets one private and one public subnet in each."""
    network: NewVpcSpec | ExistingSubnets = NewVpcSpec()
    """A new VPC (``vpc_cidr``) or existing subnets (``private_subnet_ids``)."""
    kubernetes_version: str = versions.DEFAULT_KUBERNETES_VERSION
    """EKS Kubernetes minor version (one of ``versions.SUPPORTED_KUBERNETES_VERSIONS``)."""
    stage: Literal["dev", "staging", "prod"] = "prod"
    """Lifecycle stage: prod gets deletion protection and one NAT gateway per zone."""
    endpoint_public_access: bool = False
    """Expose the API endpoint publicly (private access is always on)."""
    public_access_cidrs: list[Ipv4Cidr] = []
    """CIDRs allowed to reach a public endpoint; required when it is public (never 0.0.0.0/0)."""
    admin_principal_arns: list[PrincipalArn] | dict[str, PrincipalArn] = []
    """IAM principals granted cluster-admin through access entries. A list of plain ARNs, or ``{name: arn}`` when an
    ARN is another resource's Output (the name keys its access entry, so reordering never replaces one)."""
    tags: dict[str, str] = {}
    """Tags on every AWS resource."""
    kubeconfig_role_arn: NonEmpty | None = None
    """Role ``aws eks get-token --role-arn`` assumes in the kubeconfig (the role the program deploys as)."""
    kubeconfig_profile: NonEmpty | None = None
    """AWS profile the kubeconfig's ``aws eks get-token`` runs with; default the AWS provider's ``profile``."""
    system_instance_types: list[str] = Field(default=["m7i.xlarge"], min_length=1)
    """On-demand CPU types of the system node group (Karpenter, CoreDNS and other controllers run here)."""
    system_nodes: int = Field(default=2, ge=2)
    """Minimum and desired size of the system node group; two so a node loss keeps one Karpenter replica."""
    system_nodes_max: int = Field(default=4, ge=2)
    """Maximum size of the system node group."""
    system_root_volume_gib: int = Field(default=50, ge=20)
    """Root volume of system nodes."""
    control_plane_log_types: list[Literal["api", "audit", "authenticator", "controllerManager", "scheduler"]] = Field(
        default=["api", "audit", "authenticator"]
    )
    """Control-plane logs sent to CloudWatch (audit and authenticator logs are the security trail)."""

    @model_validator(mode="after")
    def _checks(self) -> EksClusterArgs:
        if self.kubernetes_version not in versions.SUPPORTED_KUBERNETES_VERSIONS:
            raise ValueError(f"kubernetes_version {self.kubernetes_version!r}: supported versions are "
                             f"{', '.join(versions.SUPPORTED_KUBERNETES_VERSIONS)}")
        if self.endpoint_public_access and (not self.public_access_cidrs or "0.0.0.0/0" in self.public_access_cidrs):
            raise ValueError("endpoint_public_access needs public_access_cidrs naming the networks allowed in (not "
                             "0.0.0.0/0)")
        if isinstance(self.admin_principal_arns, list):
            later = [arn for arn in self.admin_principal_arns if not isinstance(arn, str)]
            if later:
                raise ValueError(
                    "admin_principal_arns: an ARN that is an Output needs a name for its access entry; pass "
                    "{name: arn} instead of a list"
                )
        return self

    @classmethod
    def from_spec(
        cls, spec: PlatformSpec, *, cluster_name: str, kubeconfig_role_arn: StrInput | None = None,
        kubeconfig_profile: StrInput | None = None,
    ) -> EksClusterArgs:
        env = spec.environment
        net = env.networking
        return cls(
            cluster_name=cluster_name,
            zones=spec.topology.zones,
            network=ExistingSubnets(private_subnet_ids=net.private_subnet_ids) if isinstance(net, ExistingSubnetsSpec) else net,
            kubernetes_version=env.kubernetes_version,
            stage=env.stage,
            endpoint_public_access=env.endpoint_public_access,
            public_access_cidrs=env.public_access_cidrs,
            admin_principal_arns=env.admin_principal_arns,
            tags=env.tags,
            kubeconfig_role_arn=kubeconfig_role_arn,
            kubeconfig_profile=kubeconfig_profile,
        )

    def admins(self) -> dict[str, StrInput]:
        """Access-entry key -> principal ARN; plain ARNs are keyed by a hash of the ARN."""
        if isinstance(self.admin_principal_arns, dict):
            return dict(self.admin_principal_arns)
        return {_short(str(arn)): arn for arn in self.admin_principal_arns}


def _short(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:8]


class EksCluster(pulumi.ComponentResource):
    """An EKS cluster ready for Karpenter: network, encrypted control plane, system nodes, add-ons, access.

    Creates ``<name>-vpc`` with ``<name>-{private,public}-<zone>`` subnets, NAT and routes (or tags existing
    subnets), ``<name>-secrets-key`` (KMS, rotated), ``<name>-cluster-role``, ``<name>-cluster`` (API
    authentication mode, private endpoint always on), ``<name>-node-sg-discovery`` (tags the cluster security
    group for Karpenter), ``<name>-admin-<key>`` access entries, the ``<name>-system`` managed node group with
    its role and launch template (IMDSv2, hop limit 1), ``<name>-<addon>`` core add-ons and ``<name>-k8s``,
    the Kubernetes provider every in-cluster component uses. IAM roles are auto-named (random suffix); the cluster
    and its KMS alias are named after ``cluster_name``, and a second cluster of that name on the same AWS provider
    is refused. The AWS provider comes from ``opts``; the kubeconfig's ``aws eks get-token`` runs as
    ``kubeconfig_role_arn``/``kubeconfig_profile`` (default: that provider's profile).
    See https://docs.aws.amazon.com/eks/latest/userguide/create-cluster.html
    """

    cluster_name: pulumi.Output[str]
    """EKS cluster name (``args.cluster_name``, once the cluster exists)."""
    cluster_arn: pulumi.Output[str]
    endpoint: pulumi.Output[str]
    """API server URL."""
    kubeconfig: pulumi.Output[str]
    """Kubeconfig JSON (secret) whose user runs ``aws eks get-token``."""
    node_security_group_id: pulumi.Output[str]
    """The EKS cluster security group, shared by every node and tagged ``karpenter.sh/discovery``."""
    private_subnet_ids: pulumi.Output[list[str]]
    provider: k8s.Provider
    """Kubernetes provider for this cluster; pass it as ``providers=[...]`` to in-cluster components."""

    def __init__(self, name: str, args: EksClusterArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("gpuscale:index:EksCluster", name, None, opts)
        claim(self, f"EksCluster {name!r}", "aws", "EKS cluster", args.cluster_name,
              fix="give each cluster its own cluster_name")
        self._tags = dict(args.tags)
        self._opts = opts
        invoke = pulumi.InvokeOptions(parent=self)
        partition = aws.get_partition_output(opts=invoke)
        region = aws.get_region_output(opts=invoke).region

        private_ids = self._network(name, args)
        cluster = self._control_plane(name, args, private_ids, partition.partition)
        self._admin_access(name, args, cluster, partition.partition)
        before = [self._addon(name, cluster, addon, args.kubernetes_version) for addon in ADDONS_BEFORE_NODES]
        node_group = self._system_nodes(name, args, cluster, private_ids, partition, before)
        ebs_role = self._ebs_csi_role(name, args, cluster, partition.partition, region)
        after = [
            self._addon(
                name, cluster, addon, args.kubernetes_version, depends_on=[node_group],
                identity=ebs_role if addon == "aws-ebs-csi-driver" else None,
            )
            for addon in ADDONS_AFTER_NODES
        ]

        kubeconfig = pulumi.Output.all(
            cluster.name, cluster.endpoint, cluster.certificate_authority.data, region, args.kubeconfig_role_arn,
            self._kubeconfig_profile(args),
        ).apply(lambda a: json.dumps(network.kubeconfig_body(a[0], a[1], a[2], a[3], role_arn=a[4], profile=a[5])))
        self.kubeconfig = pulumi.Output.secret(kubeconfig)
        # in-cluster resources use this provider, so they wait for the nodes and add-ons it depends on
        self.provider = kubernetes_provider(
            f"{name}-k8s", self.kubeconfig, opts=self._child(depends_on=[node_group, *before, *after]),
        )
        self.cluster_name = cluster.name
        self.cluster_arn = cluster.arn
        self.endpoint = cluster.endpoint
        self.node_security_group_id = cluster.vpc_config.cluster_security_group_id
        self.private_subnet_ids = private_ids
        self.register_outputs(
            {
                "cluster_name": self.cluster_name,
                "cluster_arn": self.cluster_arn,
                "endpoint": self.endpoint,
                "kubeconfig": self.kubeconfig,
                "node_security_group_id": self.node_security_group_id,
                "private_subnet_ids": self.private_subnet_ids,
            }
        )

    def _control_plane(
        self, name: str, args: EksClusterArgs, private_ids: pulumi.Output[list[str]], partition: pulumi.Output[str],
    ) -> aws.eks.Cluster:
        """The encrypted control plane (its KMS key and alias, its role) and the cluster security group's Karpenter
        discovery tag."""
        key = aws.kms.Key(
            f"{name}-secrets-key",
            description=f"Envelope encryption of Kubernetes secrets in EKS cluster {args.cluster_name}",
            enable_key_rotation=True,
            deletion_window_in_days=30,
            tags=self._tags,
            opts=self._child(),
        )
        aws.kms.Alias(
            f"{name}-secrets-key-alias",
            name=f"alias/{args.cluster_name}-secrets",
            target_key_id=key.key_id,
            opts=self._child(),
        )
        cluster_role, role_deps = self._cluster_role(name, args, key, partition)
        cluster = aws.eks.Cluster(
            f"{name}-cluster",
            name=args.cluster_name,
            version=args.kubernetes_version,
            role_arn=cluster_role.arn,
            vpc_config=aws.eks.ClusterVpcConfigArgs(
                subnet_ids=private_ids,
                endpoint_private_access=True,
                endpoint_public_access=args.endpoint_public_access,
                public_access_cidrs=list(args.public_access_cidrs) if args.endpoint_public_access else None,
            ),
            encryption_config=aws.eks.ClusterEncryptionConfigArgs(
                resources=["secrets"],
                provider=aws.eks.ClusterEncryptionConfigProviderArgs(key_arn=key.arn),
            ),
            # access entries only (no aws-auth ConfigMap); the deploying identity keeps admin so that this same
            # program can install the in-cluster components
            access_config=aws.eks.ClusterAccessConfigArgs(
                authentication_mode="API",
                bootstrap_cluster_creator_admin_permissions=True,
            ),
            # the core add-ons are EKS-managed below, not the unmanaged copies EKS would otherwise bootstrap
            bootstrap_self_managed_addons=False,
            enabled_cluster_log_types=list(args.control_plane_log_types),
            deletion_protection=args.stage == "prod",
            tags=self._tags,
            opts=self._child(depends_on=role_deps),
        )
        aws.ec2.Tag(
            f"{name}-node-sg-discovery",
            resource_id=cluster.vpc_config.cluster_security_group_id,
            key=labels.KARPENTER_DISCOVERY_TAG,
            value=args.cluster_name,
            opts=self._child(),
        )
        return cluster

    def _child(self, depends_on: list[pulumi.Resource] | None = None) -> pulumi.ResourceOptions:
        opts: pulumi.ResourceOptions = child_opts(self, self._opts, *(depends_on or []))
        return opts

    def _kubeconfig_profile(self, args: EksClusterArgs) -> pulumi.Input[str] | None:
        """The profile ``aws eks get-token`` uses: the args', else the one the AWS provider deploys with (none: the
        default credential chain; the program that reads ``aws:profile`` passes it in ``kubeconfig_profile``)."""
        if args.kubeconfig_profile is not None:
            given: pulumi.Input[str] = args.kubeconfig_profile
            return given
        provider = self.get_provider("aws::")
        if isinstance(provider, aws.Provider):
            profile: pulumi.Output[str] = provider.profile  # type: ignore[assignment]  # None when unset
            return profile
        return None

    # ------------------------------------------------------------------------------------------ network

    def _network(self, name: str, args: EksClusterArgs) -> pulumi.Output[list[str]]:
        """Private subnet ids: a new VPC's, or the existing ones as given."""
        if isinstance(args.network, ExistingSubnets):
            given: pulumi.Output[list[str]] = output_list(args.network.private_subnet_ids)
            return given
        return pulumi.Output.all(*self._new_vpc(name, args, args.network)).apply(list)

    def _new_vpc(self, name: str, args: EksClusterArgs, net: NewVpcSpec) -> list[pulumi.Output[str]]:
        cname, tags = args.cluster_name, self._tags
        vpc = aws.ec2.Vpc(
            f"{name}-vpc",
            cidr_block=net.vpc_cidr,
            enable_dns_hostnames=True,
            enable_dns_support=True,
            tags={**tags, "Name": cname},
            opts=self._child(),
        )
        igw = aws.ec2.InternetGateway(f"{name}-igw", vpc_id=vpc.id, tags={**tags, "Name": cname}, opts=self._child())
        public_rt = aws.ec2.RouteTable(
            f"{name}-public-rt",
            vpc_id=vpc.id,
            routes=[aws.ec2.RouteTableRouteArgs(cidr_block="0.0.0.0/0", gateway_id=igw.id)],
            tags={**tags, "Name": f"{cname}-public"},
            opts=self._child(),
        )
        plan = network.subnet_plan(net.vpc_cidr, args.zones)
        public: dict[str, aws.ec2.Subnet] = {}
        private: dict[str, aws.ec2.Subnet] = {}
        for zs in plan:
            public[zs.zone] = aws.ec2.Subnet(
                f"{name}-public-{zs.zone}",
                vpc_id=vpc.id,
                cidr_block=zs.public_cidr,
                availability_zone=zs.zone,
                map_public_ip_on_launch=False,
                tags=network.subnet_tags("public", cname, zs.zone, tags),
                opts=self._child(),
            )
            aws.ec2.RouteTableAssociation(
                f"{name}-public-rta-{zs.zone}",
                subnet_id=public[zs.zone].id,
                route_table_id=public_rt.id,
                opts=self._child(),
            )
            private[zs.zone] = aws.ec2.Subnet(
                f"{name}-private-{zs.zone}",
                vpc_id=vpc.id,
                cidr_block=zs.private_cidr,
                availability_zone=zs.zone,
                tags=network.subnet_tags("private", cname, zs.zone, tags),
                opts=self._child(),
            )
        nat_zones = network.nat_gateway_zones(args.zones, args.stage)
        nats: dict[str, aws.ec2.NatGateway] = {}
        for zone in nat_zones:
            eip = aws.ec2.Eip(
                f"{name}-nat-eip-{zone}", domain="vpc", tags={**tags, "Name": f"{cname}-nat-{zone}"}, opts=self._child()
            )
            nats[zone] = aws.ec2.NatGateway(
                f"{name}-nat-{zone}",
                allocation_id=eip.id,
                subnet_id=public[zone].id,
                tags={**tags, "Name": f"{cname}-{zone}"},
                opts=self._child(depends_on=[igw]),
            )
        for zone, subnet in private.items():
            nat = nats.get(zone, nats[nat_zones[0]])
            rt = aws.ec2.RouteTable(
                f"{name}-private-rt-{zone}",
                vpc_id=vpc.id,
                routes=[aws.ec2.RouteTableRouteArgs(cidr_block="0.0.0.0/0", nat_gateway_id=nat.id)],
                tags={**tags, "Name": f"{cname}-private-{zone}"},
                opts=self._child(),
            )
            aws.ec2.RouteTableAssociation(
                f"{name}-private-rta-{zone}", subnet_id=subnet.id, route_table_id=rt.id, opts=self._child()
            )
        return [private[zs.zone].id for zs in plan]

    # ------------------------------------------------------------------------------------------ IAM and access

    def _cluster_role(
        self,
        name: str,
        args: EksClusterArgs,
        key: aws.kms.Key,
        partition: pulumi.Output[str],
    ) -> tuple[aws.iam.Role, list[pulumi.Resource]]:
        role = aws.iam.Role(
            f"{name}-cluster-role",
            description=f"EKS control plane of {args.cluster_name}",
            assume_role_policy=json.dumps(iam.cluster_role_trust_policy()),
            tags=self._tags,
            opts=self._child(),
        )
        deps: list[pulumi.Resource] = [
            aws.iam.RolePolicyAttachment(
                f"{name}-cluster-{policy.lower()}",
                role=role.name,
                policy_arn=partition.apply(functools.partial(iam.managed_policy_arn, policy=policy)),
                opts=self._child(),
            )
            for policy in iam.EKS_CLUSTER_MANAGED_POLICIES
        ]
        deps.append(
            aws.iam.RolePolicy(
                f"{name}-cluster-secrets-encryption",
                role=role.name,
                policy=key.arn.apply(lambda arn: json.dumps(iam.secrets_encryption_policy(arn))),
                opts=self._child(),
            )
        )
        return role, deps

    def _admin_access(
        self, name: str, args: EksClusterArgs, cluster: aws.eks.Cluster, partition: pulumi.Output[str]
    ) -> None:
        for key, arn in args.admins().items():
            # keyed by name (or a hash of a plain ARN) so adding or removing one admin never renames the others
            entry = aws.eks.AccessEntry(
                f"{name}-admin-{key}",
                cluster_name=cluster.name,
                principal_arn=arn,
                type="STANDARD",
                tags=self._tags,
                opts=self._child(),
            )
            aws.eks.AccessPolicyAssociation(
                f"{name}-admin-{key}-policy",
                cluster_name=cluster.name,
                principal_arn=arn,
                policy_arn=partition.apply(lambda p: iam.eks_access_policy_arn(p, iam.EKS_CLUSTER_ADMIN_ACCESS_POLICY)),
                access_scope=aws.eks.AccessPolicyAssociationAccessScopeArgs(type="cluster"),
                opts=self._child(depends_on=[entry]),
            )

    # ------------------------------------------------------------------------------------------ nodes and add-ons

    def _system_nodes(
        self,
        name: str,
        args: EksClusterArgs,
        cluster: aws.eks.Cluster,
        subnet_ids: pulumi.Output[list[str]],
        partition: pulumi.Output[aws.GetPartitionResult],
        addons: list[aws.eks.Addon],
    ) -> aws.eks.NodeGroup:
        tags = self._tags
        role = aws.iam.Role(
            f"{name}-system-node-role",
            description=f"System nodes of EKS cluster {args.cluster_name}",
            assume_role_policy=partition.dns_suffix.apply(lambda d: json.dumps(iam.node_role_trust_policy(d))),
            tags=tags,
            opts=self._child(),
        )
        attachments = [
            aws.iam.RolePolicyAttachment(
                f"{name}-system-node-{policy.lower()}",
                role=role.name,
                policy_arn=partition.partition.apply(functools.partial(iam.managed_policy_arn, policy=policy)),
                opts=self._child(),
            )
            for policy in iam.KARPENTER_NODE_MANAGED_POLICIES
        ]
        template = self._system_launch_template(name, args)
        return aws.eks.NodeGroup(
            f"{name}-system",
            cluster_name=cluster.name,
            node_group_name="system",
            node_role_arn=role.arn,
            subnet_ids=subnet_ids,
            instance_types=list(args.system_instance_types),
            capacity_type="ON_DEMAND",
            ami_type="AL2023_x86_64_STANDARD",
            scaling_config=aws.eks.NodeGroupScalingConfigArgs(
                desired_size=args.system_nodes,
                min_size=args.system_nodes,
                max_size=args.system_nodes_max,
            ),
            update_config=aws.eks.NodeGroupUpdateConfigArgs(max_unavailable=1),
            labels={labels.SYSTEM_NODE_LABEL: labels.SYSTEM_NODE_ROLE},
            # only pods that tolerate CriticalAddonsOnly (Karpenter, CoreDNS, controllers) land here
            taints=[
                aws.eks.NodeGroupTaintArgs(key=labels.CRITICAL_ADDONS_TAINT_KEY, value="true", effect="NO_SCHEDULE")
            ],
            launch_template=aws.eks.NodeGroupLaunchTemplateArgs(
                id=template.id, version=template.latest_version.apply(str)
            ),
            tags=tags,
            opts=self._child(depends_on=[*attachments, *addons]),
        )

    def _system_launch_template(self, name: str, args: EksClusterArgs) -> aws.ec2.LaunchTemplate:
        """The system nodes' launch template: IMDSv2 only (hop limit 1, so pods cannot reach the node's role),
        encrypted gp3 root."""
        return aws.ec2.LaunchTemplate(
            f"{name}-system-lt",
            description=f"System nodes of {args.cluster_name}: IMDSv2 only, encrypted gp3 root",
            metadata_options=aws.ec2.LaunchTemplateMetadataOptionsArgs(
                http_endpoint="enabled",
                http_tokens="required",
                http_put_response_hop_limit=1,
            ),
            block_device_mappings=[
                aws.ec2.LaunchTemplateBlockDeviceMappingArgs(
                    device_name="/dev/xvda",
                    ebs=aws.ec2.LaunchTemplateBlockDeviceMappingEbsArgs(
                        volume_size=args.system_root_volume_gib,
                        volume_type="gp3",
                        encrypted="true",
                        delete_on_termination="true",
                    ),
                )
            ],
            tag_specifications=[
                aws.ec2.LaunchTemplateTagSpecificationArgs(
                    resource_type=kind, tags={**self._tags, "Name": f"{args.cluster_name}-system"}
                )
                for kind in ("instance", "volume")
            ],
            update_default_version=True,
            tags=self._tags,
            opts=self._child(),
        )

    def _ebs_csi_role(
        self, name: str, args: EksClusterArgs, cluster: aws.eks.Cluster, partition: pulumi.Output[str],
        region: pulumi.Output[str],
    ) -> aws.iam.Role:
        """The EBS CSI controller's role: the AWS managed driver policy, trusted by Pod Identity for its service account
        in this cluster only."""
        account = aws.get_caller_identity_output(opts=pulumi.InvokeOptions(parent=self)).account_id
        namespace, service_account = iam.EBS_CSI_SERVICE_ACCOUNT
        role = aws.iam.Role(
            f"{name}-ebs-csi-role",
            assume_role_policy=pulumi.Output.all(partition, region, account, cluster.name).apply(
                lambda a: json.dumps(iam.pod_identity_trust_policy(
                    partition=a[0], region=a[1], account_id=a[2], cluster_name=a[3],
                    namespace=namespace, service_account=service_account,
                ))
            ),
            tags=self._tags,
            opts=self._child(),
        )
        aws.iam.RolePolicyAttachment(
            f"{name}-ebs-csi-policy",
            role=role.name,
            policy_arn=partition.apply(functools.partial(iam.managed_policy_arn, policy=iam.EBS_CSI_DRIVER_POLICY)),
            opts=self._child(),
        )
        return role

    def _addon(
        self,
        name: str,
        cluster: aws.eks.Cluster,
        addon: CoreAddon,
        kubernetes_version: str,
        depends_on: list[pulumi.Resource] | None = None,
        identity: aws.iam.Role | None = None,
    ) -> aws.eks.Addon:
        # EKS's default add-on version for this Kubernetes version (not the newest): fewer surprise upgrades
        version = aws.eks.get_addon_version_output(
            addon_name=addon,
            kubernetes_version=kubernetes_version,
            most_recent=False,
            opts=pulumi.InvokeOptions(parent=self),
        ).version
        return aws.eks.Addon(
            f"{name}-{addon}",
            cluster_name=cluster.name,
            addon_name=addon,
            addon_version=version,
            resolve_conflicts_on_create="OVERWRITE",
            resolve_conflicts_on_update="OVERWRITE",
            pod_identity_associations=[
                aws.eks.AddonPodIdentityAssociationArgs(role_arn=identity.arn, service_account=iam.EBS_CSI_SERVICE_ACCOUNT[1])
            ] if identity is not None else None,
            tags=self._tags,
            opts=self._child(depends_on=depends_on),
        )
