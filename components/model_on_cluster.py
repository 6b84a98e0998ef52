"""One model on a cluster that already runs the platform: its team's queue, its vLLM service, its front door and one
autoscaler per role, from the model, its pool and its team (the short form of ``examples/add_model.py``).

Everything a whole-platform spec also says (environment, zones, the rest of the team tree) is not needed here: the
component builds the one-model ``PlatformSpec`` sizing reads from what the args say, writes the pool and the team
once (``model.queue`` and ``model.node_pool`` are theirs), and refuses a bad value at its path in these args.
"""

from __future__ import annotations

from typing import Any, Literal

import pulumi
from pydantic import ValidationError

from gpuscale.components.alert_rules import AlertRules, AlertRulesArgs
from gpuscale.components.children import Refused, child_opts
from gpuscale.components.dashboards import Dashboards, DashboardsArgs
from gpuscale.components.inputs import ClusterName, Namespace, PrometheusUrl, QueueName
from gpuscale.components.queue_tree import QueueTree, QueueTreeArgs
from gpuscale.components.serving_layer import ServingLayerArgs, model_serving
from gpuscale.feasibility import checked_sizing
from gpuscale.problems import Problem, Problems
from gpuscale.sizing import PlatformSizing
from gpuscale.spec.base import Spec
from gpuscale.spec.model import ModelDeployment
from gpuscale.spec.platform import PlatformSpec
from gpuscale.spec.teams import QueueSpec
from gpuscale.spec.topology import GpuNodePoolSpec
from gpuscale.stackfile import format_errors

__all__ = ["ModelOnCluster", "ModelOnClusterArgs"]

_ARG_PATHS = (("models[0]", "model"), ("topology.gpu_pools[0]", "pool"), ("teams[0]", "team"),
              ("environment.aws_region", "aws_region"), ("environment.stage", "stage"),
              ("topology.provisioning.capacity_buffer_gate", "capacity_buffer_gate"))
"""Where a value of the built spec comes from in these args."""


class ModelOnClusterArgs(Spec):
    """What one model on an existing cluster must say; everything else has the stack's defaults."""

    model: dict[str, Any] | ModelDeployment
    """The model as one item of a stack file's ``models:`` (``name``, ``architecture``, ``weights``, ``slo``,
    ``workload``; optionally ``serving``, ``autoscaling``, ``front_door`` ...), without ``queue`` and ``node_pool``:
    those are ``team`` and ``pool`` (a ``ModelDeployment`` you already have must name them)."""
    pool: GpuNodePoolSpec
    """The GPU pool the model runs on, already on the cluster (a NodePool labelled ``gpuscale.io/node-pool:
    <name>``, e.g. a ``GpuNodePool``): its instance types size the replicas, its ``gpu_limit`` bounds them."""
    team: QueueSpec
    """The team's queue, created here (a leaf, under ``parent_queue`` when given); the model is charged to it."""
    aws_region: str
    """The cluster's region (S3 weights are read there)."""
    stage: Literal["dev", "staging", "prod"] = "prod"
    """Lifecycle stage of the cluster; ``prod`` (the default) keeps the stricter rules for the model's warm replicas."""
    prometheus_url: PrometheusUrl
    """The Prometheus that scrapes the vLLM pods and that the autoscalers query (an Output, e.g.
    ``PrometheusStack.prometheus_url``, or a plain URL)."""
    parent_queue: QueueName | None = None
    """An existing queue (e.g. a department another stack created) the team's queue goes under."""
    namespace: Namespace | None = None
    """Namespace of the model's objects (must exist; e.g. ``ns.metadata.name``); default ``model.serving.namespace``."""
    cluster_name: ClusterName | None = None
    """EKS cluster, for the Pod Identity role of ``s3://`` weights; without it no AWS resource is created."""
    alert_rules: bool = True
    """Create the model's PrometheusRule (``<name>-alerts``: SLO burn, KV, cold start, autoscaler input, replica
    ceiling, front door); needs prometheus-operator's CRDs on the cluster (kube-prometheus-stack)."""
    dashboards: bool = True
    """Create the model's Grafana dashboard ConfigMap (``<name>-dashboards``), labelled for kube-prometheus-stack's
    Grafana sidecar; a plain ConfigMap, harmless where no Grafana reads it."""
    capacity_buffer_gate: bool = False
    """The cluster's Karpenter runs with the ``CapacityBuffer`` feature gate (alpha, off by default in v1.14.1; e.g. a
    ``KarpenterController`` with ``capacity_buffer: true``). Needed by ``model.headroom.mode: capacity-buffer``, which
    then creates ``<name>-headroom`` (CapacityBufferSet); without it that mode is refused at ``model.headroom.mode``
    (Karpenter would store the buffer and keep no node). ``placeholder-pods`` needs no gate."""

    def platform_spec(self) -> PlatformSpec:
        """The one-model spec sizing reads; ``Refused`` at the path in these args when a value is invalid."""
        model = self.model if isinstance(self.model, dict) else self.model.model_dump(exclude_unset=True)
        clashing = [k for k, v in (("queue", self.team.name), ("node_pool", self.pool.name))
                    if k in model and model[k] != v]
        if clashing:
            raise Refused([("", f"ModelOnClusterArgs.model.{k}: leave it out, it is "
                                f"{'team' if k == 'queue' else 'pool'}.name") for k in clashing])
        raw = {
            "environment": {"name": self.team.name, "stage": self.stage, "aws_region": self.aws_region},
            # zones matter to the pool's NodePool, which this component does not create; sizing needs one
            "topology": {"zones": [f"{self.aws_region}a"], "gpu_pools": [self.pool.model_dump(exclude_unset=True)],
                         "provisioning": {"capacity_buffer_gate": self.capacity_buffer_gate}},
            "teams": [self.team.model_dump(exclude_unset=True)],
            "models": [{**model, "queue": self.team.name, "node_pool": self.pool.name}],
        }
        try:
            return PlatformSpec.model_validate(raw)
        except ValidationError as exc:
            raise Refused([_in_args(p) for p in format_errors(exc, raw)]) from None

    def sizing(self, spec: PlatformSpec) -> PlatformSizing:
        try:
            return checked_sizing(spec)
        except Problems as exc:
            raise Refused([_in_args(p) for p in exc.problems]) from None


def _in_args(problem: Problem) -> Problem:
    """A problem of the built spec at its path in ``ModelOnClusterArgs`` (``models[0].slo`` -> ``model.slo``)."""
    path = problem.path
    for spec_path, arg_path in _ARG_PATHS:
        if path == spec_path or path.startswith((f"{spec_path}.", f"{spec_path}[")):
            path = arg_path + path[len(spec_path):]
            break
    return Problem("", f"ModelOnClusterArgs.{path}: {problem.message}" if path else problem.message)


class ModelOnCluster(pulumi.ComponentResource):
    """One model on a cluster that already runs KAI (with the ``gpuscale`` Topology), KEDA, the model's GPU pool and
    a Prometheus: ``<name>-queue`` (QueueTree: the team's queue), ``<name>`` (VllmService), ``<name>-door``
    (FrontDoor, when the model may scale to zero), ``<name>-<role>`` (RoleAutoscaler per role) and ``<name>-alerts``
    (AlertRules, unless ``alert_rules`` is false), ``<name>-dashboards`` (Dashboards, unless ``dashboards`` is
    false) and, when the model's headroom pays, ``<name>-headroom`` (CapacityBufferSet, ``headroom.mode:
    capacity-buffer`` with ``capacity_buffer_gate``) or ``<name>-placeholders`` (PlaceholderPodSet, ``headroom.mode:
    placeholder-pods``), each waiting for what it needs. Providers and ``depends_on`` come from ``opts``.
    """

    endpoint: pulumi.Output[str]
    """The URL clients call (the front door's when the model has one)."""
    queue_name: pulumi.Output[str]
    """The team's queue."""
    workload_names: pulumi.Output[dict[str, str]]
    """Role -> workload name."""

    def __init__(self, name: str, args: ModelOnClusterArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        spec = args.platform_spec()
        sizing = args.sizing(spec)
        super().__init__("gpuscale:index:ModelOnCluster", name, None, opts)
        model = spec.models[0]
        queues = QueueTree(f"{name}-queue", QueueTreeArgs.from_spec(spec, parent_queue=args.parent_queue),
                           opts=child_opts(self, opts))
        # layer 3 as InferencePlatform composes it, in the caller's namespace, waiting for the team's queue
        served = model_serving(name, ServingLayerArgs(
            spec=spec, sizing=sizing, prometheus_url=args.prometheus_url, cluster_name=args.cluster_name,
            scheduling=list(queues.queues.values()),
        ), model, lambda *after: child_opts(self, opts, *after), namespace=args.namespace)
        service = served.service
        self.endpoint = served.endpoint
        if args.alert_rules:
            AlertRules(f"{name}-alerts", AlertRulesArgs.for_model(spec, sizing, model.name, namespace=args.namespace),
                       opts=child_opts(self, opts, *service.workloads.values()))
        if args.dashboards:
            Dashboards(f"{name}-dashboards", DashboardsArgs.for_model(spec, sizing, model.name, namespace=args.namespace),
                       opts=child_opts(self, opts))
        self.queue_name = queues.leaf_queue_names.apply(lambda names: names[0])
        self.workload_names = service.workload_names
        self.register_outputs({"endpoint": self.endpoint, "queue_name": self.queue_name,
                               "workload_names": self.workload_names})
