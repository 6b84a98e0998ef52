"""The front door's figures in docs/layer3-serving.md are the dev stack's, as sizing derives them.

The doc quotes dev's numbers as "(dev: N)" in "How a request is held" and "The numbers, from sizing"; each is read
here and compared with ``checked_sizing`` of ``stacks/Pulumi.dev.yaml``, so a change to sizing or to the dev stack that
moves one fails until the doc says the new number (the doc once said 1,300 and 1,681 where sizing gave 554 and 715).
"""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest

from gpuscale.feasibility import checked_sizing
from gpuscale.first_answer import FrontDoorSizing
from gpuscale.spec.platform import PlatformSpec

DOC = Path(__file__).resolve().parents[1] / "docs" / "layer3-serving.md"


def _section(text: str, start: str, end: str) -> str:
    return text[text.index(start):text.index(end, text.index(start))]


def _door(stack_specs: dict[str, PlatformSpec]) -> FrontDoorSizing:
    (door,) = [m.front_door for m in checked_sizing(stack_specs["dev"]).models if m.front_door is not None]
    assert door is not None
    return door


def _figure(line: str) -> int:
    m = re.search(r"\(dev: ([\d,]+)(?: s)?\)", line)
    assert m, f"no (dev: N) in {line!r}"
    return int(m.group(1).replace(",", ""))


@pytest.fixture(scope="module")
def numbers() -> dict[str, int]:
    """``bullet label -> dev figure`` of "The numbers, from sizing", plus the first answer's sum."""
    text = _section(DOC.read_text(encoding="utf-8"), "### The numbers, from sizing", "**Refused:")
    out: dict[str, int] = {}
    bullets = re.split(r"\n- ", text)[1:]
    for b in bullets:
        label = re.match(r"\*\*(.+?)\*\*(?: \((.+?)\))?", b)
        assert label, b
        key = label.group(1) + (f" ({label.group(2)})" if label.group(2) else "")
        if key == "first answer from zero":
            m = re.search(r"Dev: (\d+) \+ (\d+) \+ ([\d.]+) = (\d+) s against a (\d+) s", b)
            assert m, b
            out.update({"detection": int(m.group(1)), "cold start": int(m.group(2)), "first token": int(float(m.group(3))),
                        "first answer": int(m.group(4)), "request timeout": int(m.group(5))})
        else:
            out[key] = _figure(b)
    return out


def test_every_front_door_figure_is_the_dev_stacks(numbers: dict[str, int], stack_specs: dict[str, PlatformSpec]) -> None:
    door = _door(stack_specs)
    fa = door.first_answer
    assert numbers == {
        "detection": round(fa.detection_s), "cold start": round(fa.cold_start_s), "first token": round(fa.first_token_s),
        "first answer": round(fa.total_s), "request timeout": round(fa.request_timeout_s),
        "hold limit": door.hold_limit_s,
        "held requests per replica (the KEDA target)": door.per_replica,
        "queue bound": door.queue_bound,
        "Retry-After (503, at zero)": door.retry_after_s,
        "Retry-After (429, saturated)": door.retry_after_saturated_s,
    }


def test_the_retry_after_figures_of_the_walkthrough_match(stack_specs: dict[str, PlatformSpec]) -> None:
    door = _door(stack_specs)
    text = _section(DOC.read_text(encoding="utf-8"), "### How a request is held", "### The numbers, from sizing")
    step = text[text.index("7. `Retry-After`"):text.index("8. After")]
    assert [int(x) for x in re.findall(r"\(dev: (\d+) s\)", step)] == [door.retry_after_s, door.retry_after_saturated_s]
    assert math.ceil(door.first_answer.detection_s + door.first_answer.cold_start_s) == door.retry_after_s
