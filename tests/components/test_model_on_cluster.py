"""``ModelOnCluster`` composes its layer 3 through ``serving_layer.model_serving``, the function ``InferencePlatform``'s
``serving_layer`` calls per model: a model that may scale to zero gets its front door in the caller's namespace, and
each piece waits for what it waits for in the platform (the door for the serving workloads, the autoscaler for its
role's)."""

from __future__ import annotations

import copy
from typing import Any

import pulumi

from gpuscale.components import ModelOnCluster, ModelOnClusterArgs
from tests.components.support import capture, k8s_object, of_type, one, run
from tests.components.test_user_programs import POOL, SHORT_MODEL, TEAM


def scales_to_zero() -> dict[str, Any]:
    """The shipped short-form model at minimum 0 (KEDA), with a timeout the first answer from zero fits in."""
    m = copy.deepcopy(SHORT_MODEL)
    m["slo"]["request_timeout_s"] = 600
    m["autoscaling"] = {"backend": "keda", "aggregated": {"min_replicas": 0, "max_replicas": 4}}
    return m


def test_a_model_at_zero_gets_its_front_door_in_the_callers_namespace() -> None:
    outputs: dict[str, Any] = {}

    def program() -> None:
        model = ModelOnCluster("llama-8b", ModelOnClusterArgs(
            model=scales_to_zero(), pool=POOL, team=TEAM, aws_region="eu-west-1", namespace="team-b-llm",
            cluster_name="team-b", prometheus_url="http://prometheus.monitoring.svc:9090"))
        capture(outputs, "endpoint", model.endpoint)

    records = run(program)
    door = one(records, "gpuscale:index:FrontDoor")
    assert door.name == "llama-8b-door"
    services = {k8s_object(r)["metadata"]["name"]: k8s_object(r) for r in of_type(records, "kubernetes:core/v1:Service")}
    assert {s["metadata"]["namespace"] for s in services.values()} == {"team-b-llm"}
    # clients call the door's Service (it holds requests while the model wakes), not the workload's at zero
    assert set(services) == {"llama-8b", "llama-8b-aggregated"}
    assert outputs["endpoint"].startswith("http://llama-8b.team-b-llm.svc.")
    workload = one(records, "kubernetes:apps/v1:Deployment", "llama-8b-aggregated")
    assert workload.urn in _dependencies(records, door.urn)
    scaled = one(records, "kubernetes:keda.sh/v1alpha1:ScaledObject")
    assert k8s_object(scaled)["spec"]["minReplicaCount"] == 0
    assert k8s_object(scaled)["metadata"]["namespace"] == "team-b-llm"


def _dependencies(records: Any, urn: str) -> set[str]:
    [record] = [r for r in records if r.urn == urn]
    return set(record.dependencies)


def test_the_model_pieces_keep_their_logical_names() -> None:
    """Renaming a piece would replace it on every stack deployed: the names ``ModelOnCluster`` has always given."""
    records = run(lambda: ModelOnCluster("llama-8b", ModelOnClusterArgs(
        model=scales_to_zero(), pool=POOL, team=TEAM, aws_region="eu-west-1", namespace="team-b-llm",
        prometheus_url="http://prometheus.monitoring.svc:9090"), opts=pulumi.ResourceOptions()))
    components = {r.name for r in records if r.type.startswith("gpuscale:index:")}
    assert components == {"llama-8b", "llama-8b-queue", "llama-8b-door", "llama-8b-aggregated", "llama-8b-alerts",
                          "llama-8b-dashboards"}
