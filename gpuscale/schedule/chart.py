"""The objects the pinned KAI chart installs that decide scheduling, rendered from its values like its templates.

Chart ``deployments/kai-scheduler`` at KAI v0.17.0: ``templates/_helpers.tpl`` (``kai-scheduler.kai-config``, the
``Config`` the post-install hook applies), ``templates/default-shard.yaml`` (the ``SchedulingShard`` named
``default``) and ``templates/priorityclasses/*.yaml``. Only the fields that reach the scheduler and the podgrouper
are rendered; the Go program hands them to the KAI operator's own operands, which apply every default.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from gpuscale.manifests.kai import KAI_NAMESPACE

CHART_DEFAULTS: Mapping[str, Any] = {
    "global": {"clusterAutoscaling": False, "namespaceLabelSelector": {}, "podLabelSelector": {}, "nodePoolLabelKey": ""},
    "podgrouper": {"enabled": True, "queueLabelKey": "kai.scheduler/queue", "genericKartaFallback": True},
    "scheduler": {
        "enabled": True, "placementStrategy": "binpack", "ports": {"metricsPort": 8080}, "args": {},
        "goMemLimitRatio": 0.9, "plugins": {}, "actions": {},
    },
    "defaultShard": {"enabled": True},
    "defaultPriorityClasses": {"enabled": True},
    "defaultQueue": {"createDefaultQueue": True},
}
"""The chart's ``values.yaml`` defaults for the keys the rendered objects read (v0.17.0)."""

DEFAULT_SHARD = "default"
PRIORITY_CLASSES: Mapping[str, int] = {"inference": 125, "train": 50, "build": 100, "build-preemptible": 75}
"""``templates/priorityclasses/{inference,train,build,build-preemptible}.yaml``: name -> value."""


class UnsupportedChartValues(ValueError):
    """Chart values this replay cannot render faithfully."""


def merged_values(values: Mapping[str, Any]) -> dict[str, Any]:
    """Helm's merge of user values over the chart defaults: maps merge key by key, anything else replaces."""

    def merge(base: dict[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
        for key, value in over.items():
            if isinstance(value, Mapping) and isinstance(base.get(key), dict):
                base[key] = merge(base[key], value)
            else:
                base[key] = copy.deepcopy(value)
        return base

    return merge(copy.deepcopy(dict(CHART_DEFAULTS)), values)


def kai_install(values: Mapping[str, Any], namespace: str = KAI_NAMESPACE) -> dict[str, Any]:
    """``{"kaiConfig": ConfigSpec, "shardName", "schedulingShard": SchedulingShardSpec}`` as the chart renders them."""
    v = merged_values(values)
    if v["defaultQueue"]["createDefaultQueue"]:
        raise UnsupportedChartValues("KAI chart values create the default queue; gpuscale turns it off "
                                     "(defaultQueue.createDefaultQueue: false) and this replay does not render it")
    if not v["defaultShard"]["enabled"]:
        raise UnsupportedChartValues("KAI chart values disable the default SchedulingShard (defaultShard.enabled)")
    g, pg, s = v["global"], v["podgrouper"], v["scheduler"]
    global_spec: dict[str, Any] = {"replicaCount": 1}
    if g.get("namespaceLabelSelector"):
        global_spec["namespaceLabelSelector"] = g["namespaceLabelSelector"]
    if g.get("podLabelSelector"):
        global_spec["podLabelSelector"] = g["podLabelSelector"]
    if g.get("nodePoolLabelKey"):
        global_spec["nodePoolLabelKey"] = g["nodePoolLabelKey"]
    if pg.get("queueLabelKey"):
        global_spec["queueLabelKey"] = pg["queueLabelKey"]
    config: dict[str, Any] = {
        "namespace": namespace,
        "global": global_spec,
        "podGrouper": {"service": {"enabled": bool(pg["enabled"])},
                       "args": {"genericKartaFallback": bool(pg["genericKartaFallback"])}},
        "scheduler": {"service": {"enabled": bool(s["enabled"])}},
    }
    if s.get("ports", {}).get("metricsPort"):
        config["scheduler"]["schedulerService"] = {"port": s["ports"]["metricsPort"]}
    shard: dict[str, Any] = {"partitionLabelValue": "", "goMemLimitRatio": s["goMemLimitRatio"]}
    if s.get("args"):
        shard["args"] = s["args"]
    if s.get("placementStrategy"):
        shard["placementStrategy"] = {"gpu": s["placementStrategy"], "cpu": s["placementStrategy"]}
    for key in ("plugins", "actions", "scenarioSearchBudgets"):
        if s.get(key):
            shard[key] = s[key]
    return {"kaiConfig": config, "shardName": DEFAULT_SHARD, "schedulingShard": shard}


def priority_classes(values: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The chart's PriorityClasses (``defaultPriorityClasses.enabled``)."""
    if not merged_values(values)["defaultPriorityClasses"]["enabled"]:
        return []
    return [
        {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": name}, "value": value}
        for name, value in PRIORITY_CLASSES.items()
    ]
