"""Run the KAI replay program over a snapshot and read its answer."""

from __future__ import annotations

import json
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from gpuscale.schedule.binary import ensure_binary
from gpuscale.schedule.errors import ScheduleRefusal
from gpuscale.schedule.snapshot import Snapshot, SnapshotError

REPLAY_TIMEOUT_S = 600


class ReplayError(ScheduleRefusal):
    """The scheduler run itself failed (not the input)."""


class _Out(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True, populate_by_name=True)


class KaiEvent(_Out):
    kind: str
    namespace: str = ""
    name: str = ""
    type: str = ""
    reason: str = ""
    message: str = ""


class Explanation(_Out):
    reason: str = ""
    message: str = ""


class PodOutcome(_Out):
    namespace: str
    name: str
    pod_group: str = Field("", alias="podGroup")
    sub_group: str = Field("", alias="subGroup")
    node: str = ""
    events: list[KaiEvent] = []
    evictions: int = 0


class PodGroupOutcome(_Out):
    namespace: str
    name: str
    spec: dict[str, Any] = {}
    unschedulable: list[Explanation] = []
    events: list[KaiEvent] = []


class Bind(_Out):
    namespace: str
    pod: str
    node: str


class Eviction(_Out):
    namespace: str
    pod: str
    pod_group: str = Field("", alias="podGroup")
    node: str = ""
    action: str = ""
    preemptor: str = ""
    message: str = ""


class Session(_Out):
    wave: int
    index: int
    binds: list[Bind] = []
    evictions: list[Eviction] = []
    pipelined: list[KaiEvent] = []


class Verdict(_Out):
    """What KAI decided: per pod, per PodGroup and per session."""

    kai_version: str = Field(alias="kaiVersion")
    scheduler_config: str = Field(alias="schedulerConfig")
    scheduler_args: list[str] = Field(alias="schedulerArgs")
    pod_grouper_args: list[str] = Field(alias="podGrouperArgs")
    sessions: list[Session]
    unsettled_waves: list[int] = Field(alias="unsettledWaves")
    """Waves still binding or evicting when the session budget ran out: their verdict may not be final."""
    pods: list[PodOutcome]
    pod_groups: list[PodGroupOutcome] = Field(alias="podGroups")

    def pod(self, namespace: str, name: str) -> PodOutcome:
        for p in self.pods:
            if p.namespace == namespace and p.name == name:
                return p
        raise KeyError(f"{namespace}/{name}")

    def pod_group(self, namespace: str, name: str) -> PodGroupOutcome:
        for g in self.pod_groups:
            if g.namespace == namespace and g.name == name:
                return g
        raise KeyError(f"{namespace}/{name}")


def replay(snapshot: Snapshot, *, binary: Path | None = None, verbosity: int = 0) -> Verdict:
    """Schedule ``snapshot`` with the real KAI Scheduler; raises ``SnapshotError`` when the program rejects the input."""
    program = binary or ensure_binary()
    with tempfile.TemporaryDirectory(prefix="gpuscale-schedule-") as tmp:
        src, dst = Path(tmp) / "snapshot.json", Path(tmp) / "verdict.json"
        src.write_text(snapshot.to_json(), encoding="utf-8")
        try:
            proc = subprocess.run([str(program), "--in", str(src), "--out", str(dst), f"--verbosity={verbosity}"],
                                  capture_output=True, text=True, timeout=REPLAY_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            raise ReplayError(f"the KAI replay did not finish within {REPLAY_TIMEOUT_S} s") from None
        tail = "\n".join(proc.stderr.strip().splitlines()[-10:])
        if proc.returncode == 2:
            raise SnapshotError(f"KAI rejected the snapshot: {tail}")
        if proc.returncode != 0:
            raise ReplayError(f"the KAI replay failed (exit {proc.returncode}): {tail}")
        try:
            return Verdict.model_validate(json.loads(dst.read_text(encoding="utf-8")))
        except (OSError, ValueError, ValidationError) as exc:
            raise ReplayError(f"the KAI replay wrote an unreadable answer: {exc}") from None
