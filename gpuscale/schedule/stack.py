"""One call from a spec and its synth output to KAI's verdict and the per-role report."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from gpuscale.input_files import SYNTH_FILE_MAX_BYTES, read_text_bounded
from gpuscale.schedule.replay import Verdict, replay
from gpuscale.schedule.report import ScheduleReport, build_report
from gpuscale.schedule.snapshot import ReplicaLevel, RoleKey, Snapshot, SnapshotError, build_snapshot, replica_targets
from gpuscale.sizing import PlatformSizing
from gpuscale.spec.platform import PlatformSpec


@dataclass(frozen=True)
class Scheduled:
    snapshot: Snapshot
    verdict: Verdict
    report: ScheduleReport


def schedule_waves(
    spec: PlatformSpec, sizing: PlatformSizing, objects: Sequence[Mapping[str, Any]],
    charts: Iterable[Mapping[str, Any]], waves: Sequence[Mapping[RoleKey, int]], *, binary: Path | None = None,
) -> Scheduled:
    snapshot = build_snapshot(spec, sizing, objects, charts, waves)
    verdict = replay(snapshot, binary=binary)
    return Scheduled(snapshot, verdict, build_report(spec, snapshot, verdict))


def schedule_level(
    spec: PlatformSpec, sizing: PlatformSizing, objects: Sequence[Mapping[str, Any]],
    charts: Iterable[Mapping[str, Any]], level: ReplicaLevel, *, binary: Path | None = None,
) -> Scheduled:
    """Every role at ``level`` replicas, all pending at once (one wave)."""
    return schedule_waves(spec, sizing, objects, charts, [replica_targets(sizing, level)], binary=binary)


def charts_from_synth_dir(synth_dir: Path) -> list[dict[str, Any]]:
    """The chart list a ``gpuscale synth`` output directory holds (``charts.yaml``); ``SnapshotError`` naming the file
    when it is missing or unreadable."""
    path = synth_dir / "charts.yaml"
    try:
        doc = yaml.safe_load(read_text_bounded(path, SYNTH_FILE_MAX_BYTES, "a synth charts.yaml"))
    except (OSError, ValueError, yaml.YAMLError) as exc:
        raise SnapshotError(f"{path}: no chart list from `gpuscale synth` ({exc})") from None
    charts = doc.get("charts", []) if isinstance(doc, dict) else []
    return [c for c in charts if isinstance(c, dict)]
