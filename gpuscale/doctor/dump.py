"""Reading a cluster dump: one ``kubectl get ... -A -o json`` ``v1`` ``List``, or a directory of them.

Bounded and strict: only regular files (no devices, FIFOs or sockets, which could block or never end), at most
``MAX_FILE_BYTES`` in all, at most ``MAX_FILES`` per directory, UTF-8 JSON whose top level is a ``v1`` ``List`` (or one
object) of items with ``kind`` and ``metadata.name``. Anything else is a ``DumpError`` naming the file and what would
be valid; nothing is half-read.
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

MAX_FILE_BYTES = 256 * 1024 * 1024
"""Largest dump read, one file or all files of a directory together (parsed, a dump takes several times its size in
memory: this keeps the doctor within a few GiB)."""
MAX_FILES = 1000
"""Most files read from a dump directory."""
KINDS = ("Pod", "Node", "Event", "NodeClaim", "NodePool", "PodGroup", "Queue", "EC2NodeClass")
"""What the doctor reads; other kinds in a dump are ignored (counted in ``ClusterDump.ignored``)."""
KUBECTL_COMMAND = (
    "kubectl get pods,nodes,events,nodeclaims.karpenter.sh,nodepools.karpenter.sh,ec2nodeclasses.karpenter.k8s.aws,"
    "podgroups.scheduling.run.ai,queues.scheduling.run.ai -A -o json > dump.json"
)
"""The command whose output the doctor reads (EC2NodeClasses are optional: without them the NodePool's
``NodeClassReady`` condition still says whether its node class is ready)."""

Obj = Mapping[str, Any]


class DumpError(ValueError):
    """The dump cannot be read: names the file and what would be valid."""


@dataclass
class ClusterDump:
    """The objects of a dump by kind, and how many items of other kinds were skipped."""

    objects: dict[str, list[Obj]] = field(default_factory=lambda: {k: [] for k in KINDS})
    files: list[str] = field(default_factory=list)
    ignored: int = 0

    def of(self, kind: str) -> list[Obj]:
        return self.objects[kind]

    def add(self, items: Iterable[Obj]) -> None:
        for item in items:
            kind = item["kind"]
            if kind in self.objects:
                self.objects[kind].append(item)
            else:
                self.ignored += 1


def _regular_file(path: Path) -> os.stat_result:
    try:
        st = path.stat()
    except OSError as exc:
        raise DumpError(f"{path}: cannot read it ({exc.strerror or exc})") from None
    if not stat.S_ISREG(st.st_mode):
        raise DumpError(f"{path}: not a regular file (a dump is a JSON file or a directory of them)")
    if st.st_size > MAX_FILE_BYTES:
        raise DumpError(f"{path}: {st.st_size:,} bytes, more than the {MAX_FILE_BYTES:,} a dump file may have")
    return st


def _items(path: Path, doc: Any) -> list[Obj]:
    if not isinstance(doc, dict):
        raise DumpError(f"{path}: the top level is not a JSON object; expected a v1 List (kubectl get ... -o json)")
    items = doc.get("items") if doc.get("kind") == "List" or "items" in doc else [doc]
    if doc.get("kind") == "List" and doc.get("apiVersion") not in ("v1", None):
        raise DumpError(f"{path}: apiVersion {doc.get('apiVersion')!r} of a List; expected v1")
    if not isinstance(items, list):
        raise DumpError(f"{path}: items is not a list")
    for i, item in enumerate(items):
        if not isinstance(item, dict) or not isinstance(item.get("kind"), str):
            raise DumpError(f"{path}: items[{i}] has no kind")
        meta = item.get("metadata")
        if not isinstance(meta, dict) or not isinstance(meta.get("name"), str):
            raise DumpError(f"{path}: items[{i}] ({item['kind']}) has no metadata.name")
    return items


def read_file(path: Path) -> list[Obj]:
    """The items of one dump file."""
    _regular_file(path)
    try:
        with path.open("rb") as fh:
            raw = fh.read(MAX_FILE_BYTES + 1)  # the file may have grown since stat()
    except OSError as exc:
        raise DumpError(f"{path}: cannot read it ({exc.strerror or exc})") from None
    if len(raw) > MAX_FILE_BYTES:
        raise DumpError(f"{path}: more than the {MAX_FILE_BYTES:,} bytes a dump file may have")
    try:
        doc = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise DumpError(f"{path}: not UTF-8 (byte {exc.start})") from None
    except json.JSONDecodeError as exc:
        raise DumpError(f"{path}: not JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from None
    except RecursionError:
        raise DumpError(f"{path}: JSON nested too deeply") from None
    return _items(path, doc)


def read_dump(path: Path) -> ClusterDump:
    """The dump at ``path``: one file, or every ``*.json`` file of a directory (not its subdirectories)."""
    dump = ClusterDump()
    if path.is_dir():
        try:
            files = sorted(p for p in path.iterdir() if p.suffix == ".json" and not p.is_dir())
        except OSError as exc:
            raise DumpError(f"{path}: cannot list it ({exc.strerror or exc})") from None
        if not files:
            raise DumpError(f"{path}: no *.json file in it (write one with: {KUBECTL_COMMAND})")
        if len(files) > MAX_FILES:
            raise DumpError(f"{path}: {len(files)} JSON files, more than the {MAX_FILES} a dump directory may hold")
    elif path.exists() or path.is_symlink():
        files = [path]
    else:
        raise DumpError(f"{path}: does not exist (write it with: {KUBECTL_COMMAND})")
    total = sum(_regular_file(f).st_size for f in files)
    if total > MAX_FILE_BYTES:
        raise DumpError(f"{path}: {total:,} bytes in {len(files)} files, more than the {MAX_FILE_BYTES:,} a dump may "
                        "have")
    for file in files:
        dump.add(read_file(file))
        dump.files.append(str(file))
    return dump
