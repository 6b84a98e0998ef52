"""One run of the real-controllers tier: the control plane, then each controller on first use, all on 127.0.0.1.

``make e2e`` runs the tests inside a private network namespace with only ``lo`` (``unshare -n``): Karpenter's kwok
provider and KEDA's metrics server bind some ports on every interface with no option to narrow them, and inside the
namespace every interface is loopback, so nothing is reachable from outside and no traffic can leave the machine.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from e2e import acceptance
from e2e.controlplane import ControlPlane
from e2e.exporter import Exporter
from e2e.karpenter import Karpenter
from e2e.keda import Keda
from e2e.kube import Kubectl
from e2e.lws import Lws
from e2e.processes import Supervisor

REPO = Path(__file__).resolve().parents[1]
OUT = Path(os.environ.get("GPUSCALE_E2E_OUT") or REPO / "out" / "e2e")
"""Where the report, dumps and logs go (``GPUSCALE_E2E_OUT`` lets two runs of subsets write apart)."""

DUMP_RESOURCES = (
    "nodes", "pods", "deployments", "replicasets", "horizontalpodautoscalers", "events", "poddisruptionbudgets",
    "scaledobjects.keda.sh", "nodepools.karpenter.sh", "nodeclaims.karpenter.sh", "leaderworkersets.leaderworkerset.x-k8s.io",
)


def shipped_zones() -> set[str]:
    """Every ``topology.zones`` entry of the shipped stacks (``stacks/Pulumi.*.yaml``)."""
    from gpuscale.stackfile import load_stack_file

    return {z for path in sorted((REPO / "stacks").glob("Pulumi.*.yaml")) for z in load_stack_file(path).topology.zones}


def in_private_netns() -> bool:
    """True when the only network interface is loopback (``make e2e``'s ``unshare -n``)."""
    # /proc/net/dev is per network namespace (/sys/class/net is not, unless sysfs is remounted)
    try:
        lines = Path("/proc/net/dev").read_text(encoding="utf-8").splitlines()[2:]
    except OSError:
        return False
    return [line.split(":", 1)[0].strip() for line in lines] == ["lo"]


@dataclass
class Harness:
    work: Path
    supervisor: Supervisor = field(init=False)
    plane: ControlPlane = field(init=False)
    kubectl: Kubectl = field(init=False)
    exporter: Exporter | None = None
    keda: Keda | None = None
    karpenter: Karpenter | None = None
    lws: Lws | None = None
    extras: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.supervisor = Supervisor(self.work / "logs")
        self.plane = ControlPlane(self.supervisor, self.work / "cluster")

    def start(self) -> None:
        self.plane.start()
        assert self.plane.kubeconfig is not None
        self.kubectl = Kubectl(self.plane.kubeconfig)
        acceptance.install_crds(self.kubectl, acceptance.crd_documents())

    def ensure_exporter(self) -> Exporter:
        """The synthetic vLLM exporter every lane's Prometheus scrapes (each lane its own paths, ``e2e.lanes``)."""
        if self.exporter is None:
            self.exporter = Exporter()
        return self.exporter

    def ensure_keda(self) -> Keda:
        if self.keda is None:
            self.keda = Keda(self.supervisor, self.plane, self.kubectl, self.work / "keda")
            self.keda.start()
        return self.keda

    def ensure_karpenter(self, zones: list[str]) -> Karpenter:
        """Karpenter (kwok provider) and kwok, offering the catalogue's GPU types in ``zones`` and every zone of the
        shipped stacks (started once: the provider reads its instance types at start, and the KEDA scenarios serve
        dev's and prod's roles, in different regions, from one session)."""
        if self.karpenter is None:
            zones = sorted(set(zones) | shipped_zones())
            self.karpenter = Karpenter(self.supervisor, self.plane, self.kubectl, self.work / "karpenter", zones)
            self.karpenter.start()
        elif not set(zones) <= set(self.karpenter.zones):
            raise RuntimeError(f"Karpenter offers zones {self.karpenter.zones}, a scenario needs {zones}")
        return self.karpenter

    def ensure_lws(self) -> Lws:
        if self.lws is None:
            self.lws = Lws(self.supervisor, self.plane, self.kubectl, self.work / "lws")
            self.lws.start()
        return self.lws

    def dump(self, scenario: str) -> Path:
        path = OUT / "dumps" / f"{scenario}.json"
        self.kubectl.dump(path, DUMP_RESOURCES)
        return path

    def stop(self) -> None:
        if self.exporter is not None:
            self.exporter.close()
        self.supervisor.stop()
