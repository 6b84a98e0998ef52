"""``gpuscale doctor`` on the command line: exit codes, the --json document, and refusals of bad dumps."""

from __future__ import annotations

import copy
import json
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from gpuscale.doctor import dump as dump_module
from tests.cli.runner import FastRunner
from tests.conftest import stack_path
from tests.doctor.builders import HOUR, DumpBuilder

Builder = Callable[[str], DumpBuilder]
runner = FastRunner()


def quota_and_limit(b: DumpBuilder) -> DumpBuilder:
    """The dev pool full (4 of 4 GPUs, sandbox's quota 4 used) and a fifth replica Pending."""
    b.nodepool("l40s-spot", gpus_used=4)
    b.queues()
    nodes = b.nodes("l40s-spot", 4)
    for pod, node in zip(b.pods("llama-8b", "aggregated", 4, seconds_ago=2 * HOUR), nodes, strict=True):
        b.bind(pod, node)
    pod = b.pods("llama-8b", "aggregated", 5)[-1]
    b.kai_unschedulable(pod, "Non-preemptible workload is over quota. Workload requested 1 GPUs, but sandbox quota is 4 "
                             "GPUs, while 4 GPUs are already allocated for non-preemptible pods. Use a preemptible "
                             "workload to go over quota.", reasons=("NonPreemptibleOverQuota",))
    return b


def test_stuck_exits_1_and_writes_the_json_document(builder: Builder, tmp_path: Path) -> None:
    dump = quota_and_limit(builder("dev")).write(tmp_path / "dump.json")
    out = tmp_path / "report.json"
    result = runner.invoke(args=["doctor", "--dump", str(dump), "--stack-file", str(stack_path("dev")),
                                 "--json", str(out)])
    assert result.exit_code == 1, result.output
    assert "leaf queue sandbox is at its GPU quota" in result.output and "Traceback" not in result.output
    doc = json.loads(out.read_text())
    assert set(doc) == {"stuck", "in_progress"} and doc["in_progress"] == []
    layers = {f["layer"] for f in doc["stuck"]}
    assert layers == {"kai", "karpenter"}  # the quota, and the pool's GPU limit the next node would exceed
    for finding in doc["stuck"]:
        assert set(finding) == {"pod", "layer", "cause", "evidence", "confirm_with"}
        assert finding["pod"].startswith("inference/llama-8b-aggregated-")
        assert all(e.split(": ", 1)[0].split("/", 1)[0] in {"Pod", "PodGroup", "Queue", "NodePool"}
                   for e in finding["evidence"])


def test_nothing_stuck_exits_0(builder: Builder, tmp_path: Path) -> None:
    b = builder("dev")
    b.nodepool("l40s-spot")
    dump = b.write(tmp_path / "dump.json")
    result = runner.invoke(args=["doctor", "--dump", str(dump)])
    assert result.exit_code == 0, result.output
    assert "no GPU pod is Pending" in result.output


def test_a_directory_of_files_reads_as_one_dump(builder: Builder, tmp_path: Path) -> None:
    b = quota_and_limit(builder("dev"))
    one = b.write(tmp_path / "one.json")
    split = tmp_path / "split"
    split.mkdir()
    items = json.loads(one.read_text())["items"]
    for i, part in enumerate((items[: len(items) // 2], items[len(items) // 2:])):
        (split / f"{i}.json").write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": part}))
    (split / "notes.txt").write_text("not read")
    (split / "old.json").mkdir()  # a subdirectory, even one named like a dump, is not read
    a, c = tmp_path / "a.json", tmp_path / "c.json"
    assert runner.invoke(args=["doctor", "--dump", str(one), "--json", str(a)]).exit_code == 1
    assert runner.invoke(args=["doctor", "--dump", str(split), "--json", str(c)]).exit_code == 1
    assert json.loads(a.read_text()) == json.loads(c.read_text())


def refusal(args: list[str]) -> str:
    result = runner.invoke(args=["doctor", *args])
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)  # a refusal, not a crash
    return str(result.output)


@pytest.mark.parametrize(("content", "says"), [
    (b"{not json", "not JSON: "),
    (b"\xff\xfe{}", "not UTF-8"),
    (b"[1, 2]", "the top level is not a JSON object; expected a v1 List"),
    (b'{"apiVersion": "v1", "kind": "List", "items": {}}', "items is not a list"),
    (b'{"apiVersion": "v1", "kind": "List", "items": [{"metadata": {"name": "x"}}]}', "items[0] has no kind"),
    (b'{"apiVersion": "v1", "kind": "List", "items": [{"kind": "Pod", "metadata": {}}]}',
     "items[0] (Pod) has no metadata.name"),
    (b'{"apiVersion": "v2", "kind": "List", "items": []}', "apiVersion 'v2' of a List; expected v1"),
    (b"[" * 100_000 + b"]" * 100_000, "JSON nested too deeply"),
])
def test_bad_dumps_are_refused_with_the_file_and_the_reason(tmp_path: Path, content: bytes, says: str) -> None:
    path = tmp_path / "dump.json"
    path.write_bytes(content)
    output = refusal(["--dump", str(path)])
    assert str(path) in output and says in output


def test_deeply_nested_json_is_refused_not_a_recursion_error(tmp_path: Path) -> None:
    path = tmp_path / "dump.json"
    path.write_bytes(b'{"a":' * 200_000 + b"1" + b"}" * 200_000)
    assert "dump.json" in refusal(["--dump", str(path)])


def test_non_regular_files_are_refused_without_reading(tmp_path: Path) -> None:
    fifo = tmp_path / "dump.json"
    os.mkfifo(fifo)  # reading it would block forever
    assert "not a regular file" in refusal(["--dump", str(fifo)])
    assert "not a regular file" in refusal(["--dump", "/dev/zero"])


def test_files_over_the_limit_are_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(dump_module, "MAX_FILE_BYTES", 1000)
    path = tmp_path / "dump.json"
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": []}) + " " * 1000)
    assert "more than the 1,000 a dump file may have" in refusal(["--dump", str(path)])
    split = tmp_path / "split"
    split.mkdir()
    for i in range(3):  # each under the limit, together over it
        (split / f"{i}.json").write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": []}) + " " * 400)
    assert "bytes in 3 files, more than the 1,000 a dump may have" in refusal(["--dump", str(split)])


def test_missing_and_empty_dumps_say_how_to_make_one(tmp_path: Path) -> None:
    assert "does not exist (write it with: kubectl get pods,nodes,events" in refusal(["--dump", str(tmp_path / "x")])
    assert "no *.json file in it" in refusal(["--dump", str(tmp_path)])


def test_output_and_stack_options_are_checked_first(tmp_path: Path) -> None:
    path = tmp_path / "dump.json"
    path.write_text('{"apiVersion": "v1", "kind": "List", "items": []}')
    assert "--json" in refusal(["--dump", str(path), "--json", str(tmp_path)])  # typer's dir_okay=False
    assert "not both" in refusal(["--dump", str(path), "--stack", "dev", "--stack-file", str(stack_path("dev"))])
    assert not list(tmp_path.glob(".*"))  # nothing half-written


def _paths(value: object, prefix: tuple[str | int, ...] = ()) -> list[tuple[str | int, ...]]:
    out: list[tuple[str | int, ...]] = [prefix] if prefix else []
    if isinstance(value, dict):
        for k, v in value.items():
            out += _paths(v, (*prefix, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            out += _paths(v, (*prefix, i))
    return out


def test_a_field_of_the_wrong_type_anywhere_is_no_traceback(builder: Builder, tmp_path: Path) -> None:
    from gpuscale.doctor.cluster import Settings
    from gpuscale.doctor.diagnose import diagnose
    from gpuscale.doctor.dump import DumpError, read_dump
    from gpuscale.spec.topology import ProvisioningSpec

    items = json.loads(quota_and_limit(builder("dev")).write(tmp_path / "dump.json").read_text())["items"]
    kinds_seen: set[str] = set()
    cases = 0
    for index, item in enumerate(items):
        if item["kind"] in kinds_seen and item["kind"] != "Pod":
            continue
        kinds_seen.add(item["kind"])
        for path in _paths(item)[::7]:  # every seventh field of one object per kind, each pending pod's too
            if path[:2] in (("metadata", "name"),) or path == ("kind",):
                continue
            for wrong in (7, "x", [1], {"a": 1}, None):
                mutated = copy.deepcopy(items)
                target = mutated[index]
                for step in path[:-1]:
                    target = target[step]
                target[path[-1]] = wrong
                (tmp_path / "m.json").write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": mutated}))
                try:
                    dump = read_dump(tmp_path / "m.json")
                except DumpError:  # an item without kind or name: refused, which is fine
                    continue
                diagnose(dump, Settings.from_provisioning(ProvisioningSpec()))
                cases += 1
    assert cases > 500
