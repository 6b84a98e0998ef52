"""LwsController under mocks: the pinned OCI chart, the image pinned to the release, KAI (not Volcano) gangs groups."""

from __future__ import annotations

from gpuscale import versions
from gpuscale.components.lws_controller import LwsController, LwsControllerArgs
from gpuscale.manifests.vllm import lws_chart_values, needs_lws
from gpuscale.sizing import size_platform
from tests.components.support import run
from tests.specs import model, pd_spec


def test_chart_is_pinned() -> None:
    records = run(lambda: LwsController("lws", LwsControllerArgs()))
    (chart,) = [r for r in records if r.type == "kubernetes:helm.sh/v4:Chart"]
    (ns,) = [r for r in records if r.type == "kubernetes:core/v1:Namespace"]
    assert chart.inputs["chart"] == "oci://registry.k8s.io/lws/charts/lws"
    assert chart.inputs["version"] == versions.LWS.version
    assert "repositoryOpts" not in chart.inputs  # OCI chart
    assert chart.inputs["namespace"] == ns.inputs["metadata"]["name"] == "lws-system"
    assert ns.urn in chart.dependencies
    assert chart.inputs["values"] == lws_chart_values()


def test_installed_only_for_multi_node_models() -> None:
    assert not needs_lws(size_platform(pd_spec()))
    multi = pd_spec(models=[model("m70b", arch=pd_spec().models[0].architecture.model_dump(), queue="chat", pool="h100",
                                  parallelism={"tensor_parallel_size": 8, "pipeline_parallel_size": 2},
                                  autoscaling={"aggregated": {"max_replicas": 2}})])
    assert needs_lws(size_platform(multi))
