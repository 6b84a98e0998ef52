"""The PromQL of an autoscaler trigger as a small expression tree: rendered into the ScaledObject, evaluated by the
simulator on its scrapes, and parsed back from an emitted ScaledObject by the KEDA decision model.

Only the subset the signals use: ``sum(<gauge>{...})``, ``sum(rate(<counter>{...}[w]))``, either with an ``offset d``
modifier on its selector, number literals, ``+ - * /``, the filter ``> <number>``, ``clamp_min(v, n)``,
``clamp_max(v, n)``, ``ln(v)``, ``vector(n)``, ``or on()``, ``stddev_over_time((v)[range:step])`` and
``avg_over_time((v)[range:step])``. Every aggregate is a ``sum`` without
``by``, so every vector here has at most one element and no labels; evaluation follows Prometheus' instant-query
semantics for such vectors (``promql/engine.go`` at the pinned Prometheus of kube-prometheus-stack): an operation on
an empty vector is empty, ``x / 0`` is ``+Inf``/``-Inf``/``NaN`` as in Go, a comparison without ``bool`` drops the
element when false (``NaN > 0`` is false), ``a or on() b`` is ``b`` only when ``a`` is empty, ``clamp_min`` keeps NaN,
and a selector's ``offset`` reads the samples that much before the instant it is evaluated at (inside a subquery, before
each of the subquery's points: ``promql/engine.go`` evaluates the subquery's operand at every step as an instant query).
"""

from __future__ import annotations

import functools
import math
import re
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, fields, replace
from typing import Any, ClassVar, Protocol, cast, runtime_checkable

Matcher = tuple[str, str, str]
"""``(label, operator, value)``: ``=``, ``!=``, ``=~`` or ``!~``."""


class Samples(Protocol):
    """What Prometheus holds for the selected pods at the query's instant; ``None``: no series at all."""

    def gauge_sum(self, metric: str, matchers: tuple[Matcher, ...]) -> float | None:
        """``sum(<metric>{matchers})``."""

    def rate_sum(self, metric: str, matchers: tuple[Matcher, ...], window: str) -> float | None:
        """``sum(rate(<metric>{matchers}[window]))``."""


@runtime_checkable
class RangeSamples(Samples, Protocol):
    """Samples that also hold the past: what a subquery reads."""

    def at(self, ago_s: float) -> Samples | None:
        """The samples as Prometheus held them ``ago_s`` seconds before the query's instant; None: none that old
        (Prometheus had not scraped the role yet)."""


class RollingSamples(RangeSamples, Protocol):
    """Range samples that never change and keep each subquery's row of points (``subquery_rows``), so that the next
    instant's subquery takes the row one step on instead of reading every point again (``OverTime.row``)."""

    subquery_rows: dict[str, list[float | None]]
    """Subquery (rendered) -> the operand's value ``k`` steps back, ``k = 0..n-1`` (None: no point there)."""

    def step_back(self, step_s: float, n: int, reach_s: float = 0.0) -> RollingSamples | None:
        """``at(step_s)``, if for every ``k`` in ``1..n-1`` ``at(k x step_s)`` is exactly what that samples'
        ``at((k - 1) x step_s)`` returned when it kept its rows (the same instants, the same past, down to ``reach_s``
        before the oldest point: the offsets inside the operand); else None."""


@functools.cache
def _ranged(cls: type) -> bool:
    """Whether samples of this class hold the past (``RangeSamples``): once per class, as a runtime ``Protocol`` check
    costs ~10 us."""
    return issubclass(cls, RangeSamples)


_DURATION_S = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


def duration_s(text: str) -> float:
    """A PromQL duration of one unit (``30s``, ``1m``, ``1h``) in seconds."""
    return float(text[:-1]) * _DURATION_S[text[-1]]


def duration(seconds: float) -> str:
    """A whole number of seconds as a PromQL duration of one unit, the largest that divides it (``300`` -> ``5m``)."""
    whole = round(seconds)
    if whole <= 0 or whole != seconds:
        raise ValueError(f"{seconds} s: a duration here is a positive whole number of seconds")
    unit = max((u for u, s in _DURATION_S.items() if whole % s == 0), key=_DURATION_S.__getitem__)
    return f"{whole // round(_DURATION_S[unit])}{unit}"


@dataclass(frozen=True)
class Vec:
    """An instant vector of at most one label-less element; ``value`` None: empty."""

    value: float | None


Result = float | Vec
"""A scalar (a number literal) or a vector."""


def _fmt_number(x: float) -> str:
    """A PromQL number literal: six significant digits (scientific notation for small costs)."""
    return f"{x:.6g}"


def _render_matchers(matchers: tuple[Matcher, ...]) -> str:
    return "{" + ",".join(f'{k}{op}"{v}"' for k, op, v in matchers) + "}"


class Expr(ABC):
    """One node of a trigger query."""

    precedence: int = 10
    """Binding strength (Prometheus: ``or`` 1 < comparisons 4 < ``+ -`` 5 < ``* /`` 6 < an atom)."""

    @abstractmethod
    def render(self) -> str:
        """The node as PromQL."""

    def evaluate(self, samples: Samples) -> Result:
        """What Prometheus answers for the node on these samples."""
        return self.apply(samples, [o.evaluate(samples) for o in self.children()])

    @abstractmethod
    def apply(self, samples: Samples, args: Sequence[Result]) -> Result:
        """The node's answer from its children's answers on the same samples (``args``, in ``children``'s order):
        the node's own rule, whoever evaluated the children (``evaluate``, or a ``Plan`` that shares them)."""

    def leaves(self) -> Iterator[Series]:
        """Every series selector the node reads."""
        for child in self.children():
            yield from child.leaves()

    def children(self) -> tuple[Expr, ...]:
        return ()

    def reach_s(self) -> float:
        """How far before the query's instant the node reads samples, seconds (offsets and subquery ranges): how much
        of the past an evaluator must keep for it."""
        return max((c.reach_s() for c in self.children()), default=0.0)

    def __str__(self) -> str:
        return self.render()

    # operators build trees: ``a * b``, ``a + 1e-5`` (numbers become literals)
    def __add__(self, other: Expr | float) -> Expr:
        return Binary("+", self, lit(other))

    def __sub__(self, other: Expr | float) -> Expr:
        return Binary("-", self, lit(other))

    def __mul__(self, other: Expr | float) -> Expr:
        return Binary("*", self, lit(other))

    def __truediv__(self, other: Expr | float) -> Expr:
        return Binary("/", self, lit(other))


def lit(x: Expr | float) -> Expr:
    return x if isinstance(x, Expr) else Number(float(x))


@dataclass(frozen=True, eq=True)
class Number(Expr):
    value: float

    def render(self) -> str:
        return _fmt_number(self.value)

    def apply(self, samples: Samples, args: Sequence[Result]) -> Result:
        return self.value


@dataclass(frozen=True, eq=True)
class Series(Expr):
    """``sum(<metric>{...})`` of a gauge, or ``sum(rate(<metric>{...}[window]))`` of a counter (per-pod rates summed)."""

    metric: str
    matchers: tuple[Matcher, ...]
    window: str | None = None
    """``rate()`` window; None: a gauge."""
    offset: str | None = None
    """``offset`` modifier (a duration): the selector reads the samples this long before the instant; None: none."""

    def render(self) -> str:
        sel = f"{self.metric}{_render_matchers(self.matchers)}"
        shift = f" offset {self.offset}" if self.offset is not None else ""
        return f"sum(rate({sel}[{self.window}]{shift}))" if self.window is not None else f"sum({sel}{shift})"

    def apply(self, samples: Samples, args: Sequence[Result]) -> Result:
        if self.offset is not None:
            # no samples that old (a plain ``Samples`` has no past): the selector is empty, as in Prometheus; ``at``
            # looked up, not a runtime ``Protocol`` check (tens of microseconds, on every point of a subquery)
            at: Callable[[float], Samples | None] | None = getattr(samples, "at", None)
            past = at(duration_s(self.offset)) if at is not None else None
            if past is None:
                return Vec(None)
            samples = past
        if self.window is None:
            return Vec(samples.gauge_sum(self.metric, self.matchers))
        return Vec(samples.rate_sum(self.metric, self.matchers, self.window))

    def leaves(self) -> Iterator[Series]:
        yield self

    def reach_s(self) -> float:
        return duration_s(self.offset) if self.offset is not None else 0.0


def _go_div(a: float, b: float) -> float:
    if b != 0.0:
        return a / b
    if a == 0.0 or math.isnan(a):
        return math.nan
    return math.copysign(math.inf, a) * math.copysign(1.0, b)


_ARITH: dict[str, Callable[[float, float], float]] = {
    "+": lambda a, b: a + b,
    "-": lambda a, b: a - b,
    "*": lambda a, b: a * b,
    "/": _go_div,
}
_PRECEDENCE = {"+": 5, "-": 5, "*": 6, "/": 6}


@dataclass(frozen=True, eq=True)
class Binary(Expr):
    """``a <op> b`` for ``+ - * /`` (vector-vector matching on no labels, vector-scalar element-wise)."""

    op: str
    left: Expr
    right: Expr

    @property
    def precedence(self) -> int:  # type: ignore[override]
        return _PRECEDENCE[self.op]

    def render(self) -> str:
        # left-associative: a right operand of the same strength needs parentheses
        return f"{_wrap(self.left, self.precedence)} {self.op} {_wrap(self.right, self.precedence + 1)}"

    def apply(self, samples: Samples, args: Sequence[Result]) -> Result:
        a, b = args
        f = _ARITH[self.op]
        if isinstance(a, float) and isinstance(b, float):
            return f(a, b)
        va = a.value if isinstance(a, Vec) else a
        vb = b.value if isinstance(b, Vec) else b
        if va is None or vb is None:
            return Vec(None)
        return Vec(f(va, vb))

    def children(self) -> tuple[Expr, ...]:
        return (self.left, self.right)


class _OnVector(Expr):
    """A function or filter of one vector operand."""

    operand: Expr

    def children(self) -> tuple[Expr, ...]:
        return (self.operand,)

    def _vector(self, args: Sequence[Result]) -> Vec:
        v = args[0]
        if not isinstance(v, Vec):
            raise ValueError(f"{self.render()}: needs a vector operand, not a number")
        return v


@dataclass(frozen=True, eq=True)
class Above(_OnVector):
    """``v > n``: keeps the element only where it is above ``n`` (a filter, not ``bool``)."""

    operand: Expr
    threshold: float
    precedence = 4

    def render(self) -> str:
        return f"{_wrap(self.operand, self.precedence)} > {_fmt_number(self.threshold)}"

    def apply(self, samples: Samples, args: Sequence[Result]) -> Result:
        v = self._vector(args)
        return v if v.value is not None and v.value > self.threshold else Vec(None)


@dataclass(frozen=True, eq=True)
class Otherwise(_OnVector):
    """``v or on() vector(n)``: ``n`` exactly when ``v`` is empty (no series, or filtered out)."""

    operand: Expr
    default: float
    precedence = 1

    def render(self) -> str:
        return f"{_wrap(self.operand, self.precedence)} or on() vector({_fmt_number(self.default)})"

    def apply(self, samples: Samples, args: Sequence[Result]) -> Result:
        v = self._vector(args)
        return v if v.value is not None else Vec(self.default)


@dataclass(frozen=True, eq=True)
class ClampMin(_OnVector):
    """``clamp_min(v, n)`` (Go's ``math.Max``: NaN stays NaN)."""

    operand: Expr
    floor: float

    def render(self) -> str:
        return f"clamp_min({self.operand.render()}, {_fmt_number(self.floor)})"

    def apply(self, samples: Samples, args: Sequence[Result]) -> Result:
        v = self._vector(args)
        if v.value is None or math.isnan(v.value):
            return v
        return Vec(max(v.value, self.floor))


@dataclass(frozen=True, eq=True)
class ClampMax(_OnVector):
    """``clamp_max(v, n)`` (Go's ``math.Min``: NaN stays NaN)."""

    operand: Expr
    ceiling: float

    def render(self) -> str:
        return f"clamp_max({self.operand.render()}, {_fmt_number(self.ceiling)})"

    def apply(self, samples: Samples, args: Sequence[Result]) -> Result:
        v = self._vector(args)
        if v.value is None or math.isnan(v.value):
            return v
        return Vec(min(v.value, self.ceiling))


@dataclass(frozen=True, eq=True)
class Ln(_OnVector):
    """``ln(v)`` (Go's ``math.Log``: ``ln(0)`` is ``-Inf``, a negative number NaN)."""

    operand: Expr

    def render(self) -> str:
        return f"ln({self.operand.render()})"

    def apply(self, samples: Samples, args: Sequence[Result]) -> Result:
        v = self._vector(args)
        if v.value is None or math.isnan(v.value):
            return v
        x = v.value
        return Vec(-math.inf if x == 0.0 else math.nan if x < 0.0 else math.log(x))


@dataclass(frozen=True, eq=True)
class Sqrt(_OnVector):
    """``sqrt(v)`` (Go's ``math.Sqrt``: a negative number is NaN)."""

    operand: Expr

    def render(self) -> str:
        return f"sqrt({self.operand.render()})"

    def apply(self, samples: Samples, args: Sequence[Result]) -> Result:
        v = self._vector(args)
        if v.value is None or math.isnan(v.value):
            return v
        return Vec(math.nan if v.value < 0.0 else math.sqrt(v.value))


@dataclass(frozen=True, eq=True)
class OverTime(_OnVector):
    """``<func>_over_time((v)[range:step])``: an aggregate of ``v`` evaluated every ``step`` over the last ``range`` (a
    subquery, ``promql/functions.go``)."""

    operand: Expr
    range: str
    step: str
    function: ClassVar[str]

    def render(self) -> str:
        return f"{self.function}(({self.operand.render()})[{self.range}:{self.step}])"

    def reach_s(self) -> float:
        return duration_s(self.range) + self.operand.reach_s()

    @functools.cached_property
    def _plan(self) -> tuple[str, str, float, int, float]:
        """The operand's rendering (the key of ``subquery_memo``), the subquery's (of ``subquery_rows``), the step in
        seconds, the number of steps and how far before a point the operand reads (its offsets): once per node, not per
        query."""
        step_s = duration_s(self.step)
        return (
            self.operand.render(), self.render(), step_s, int(duration_s(self.range) // step_s), self.operand.reach_s(),
        )

    def points(self, samples: Samples, present: Result | None = None) -> list[float]:
        """The subquery's points, newest first (a step at which ``v`` is empty, or before the first scrape, has none).
        On samples without a past (a plain ``Samples``, e.g. a Prometheus that has scraped once) the range holds the
        present point only. ``present``: the operand's answer on ``samples``, if the caller has it."""
        if not _ranged(type(samples)):
            value = value_of(present if present is not None else self.operand.evaluate(samples))
            return [value] if value is not None else []
        return [x for x in self.row(cast(RangeSamples, samples), present) if x is not None]

    def row(self, samples: RangeSamples, present: Result | None = None) -> list[float | None]:
        """The operand's value at each step back, ``k = 0..n-1`` (None: no point there). Samples that keep their rows
        (``RollingSamples``) reuse the row of the samples one step back when ``step_back`` vouches that its points are
        this row's from ``k = 1`` on: the newest point is the only one read, and the row is the same list of values
        the ``n`` look-ups would give."""
        key, name, step_s, n, reach_s = self._plan
        rows: dict[str, list[float | None]] | None = getattr(samples, "subquery_rows", None)
        if rows is None:
            return self._read_row(samples, key, step_s, n, present)
        row = rows.get(name)
        if row is not None:
            return row
        prev = cast(RollingSamples, samples).step_back(step_s, n, reach_s)
        prev_row = prev.subquery_rows.get(name) if prev is not None else None
        if prev_row is not None:
            row = [self._value(samples, key, present), *prev_row[: n - 1]]
        else:
            row = self._read_row(samples, key, step_s, n, present)
        rows[name] = row
        return row

    def _read_row(
        self, samples: RangeSamples, key: str, step_s: float, n: int, present: Result | None,
    ) -> list[float | None]:
        row: list[float | None] = [self._value(samples, key, present)]
        for k in range(1, n):
            past = samples.at(k * step_s)
            row.append(self._value(past, key) if past is not None else None)
        return row

    def _value(self, samples: Samples, key: str, given: Result | None = None) -> float | None:
        """The operand on one point's samples (``given``: its answer there, known already). Samples that never change
        may carry a dict ``subquery_memo``: a point is then evaluated once, not once per query that reaches back to
        it."""
        memo: dict[str, Result] | None = getattr(samples, "subquery_memo", None)
        v = memo.get(key) if memo is not None else None
        if v is None:
            v = given if given is not None else self.operand.evaluate(samples)
            if memo is not None:
                memo[key] = v
        return value_of(v)

    @staticmethod
    @abstractmethod
    def aggregate(points: list[float]) -> float:
        """The function over a non-empty list of points."""

    def apply(self, samples: Samples, args: Sequence[Result]) -> Result:
        points = self.points(samples, args[0])
        return Vec(self.aggregate(points)) if points else Vec(None)


@dataclass(frozen=True, eq=True)
class StddevOverTime(OverTime):
    """``stddev_over_time``: the population standard deviation of the points (``funcStddevOverTime``); a single point
    reads 0."""

    function: ClassVar[str] = "stddev_over_time"

    @staticmethod
    def aggregate(points: list[float]) -> float:
        mean = math.fsum(points) / len(points)
        return math.sqrt(max(math.fsum((x - mean) ** 2 for x in points) / len(points), 0.0))


@dataclass(frozen=True, eq=True)
class AvgOverTime(OverTime):
    """``avg_over_time``: the mean of the points (``funcAvgOverTime``)."""

    function: ClassVar[str] = "avg_over_time"

    @staticmethod
    def aggregate(points: list[float]) -> float:
        return math.fsum(points) / len(points)


OVER_TIME: dict[str, type[OverTime]] = {c.function: c for c in (StddevOverTime, AvgOverTime)}
"""The subquery functions the parser reads, by name."""


def shifted(e: Expr, offset: str) -> Expr:
    """``e`` as it read ``offset`` earlier: every selector in it with that ``offset`` modifier. PromQL takes ``offset``
    on selectors and subqueries only (``(a + b) offset 5m`` does not parse), so an expression is moved back by moving
    each of its selectors; a number or ``vector(n)`` reads the same at any instant."""
    if isinstance(e, Series):
        if e.offset is not None:
            raise ValueError(f"{e.render()}: already has an offset")
        return replace(e, offset=offset)
    if isinstance(e, OverTime):
        raise ValueError(f"{e.render()}: shifting a subquery is not part of the subset")
    # every node is a frozen dataclass whose operands are its Expr fields
    node: Any = e
    moved = {f.name: shifted(v, offset) for f in fields(node) if isinstance(v := getattr(e, f.name), Expr)}
    out: Expr = replace(node, **moved) if moved else e
    return out


def _wrap(e: Expr, at_least: int) -> str:
    s = e.render()
    return f"({s})" if e.precedence < at_least else s


def evaluate(expr: Expr, samples: Samples) -> float | None:
    """The query's answer: ``None`` for an empty result, else the element's value (NaN and Inf included)."""
    return value_of(expr.evaluate(samples))


def value_of(r: Result) -> float | None:
    """A result's number: the element's value (``None``: empty) or the scalar."""
    return r.value if isinstance(r, Vec) else r


class Plan:
    """Queries answered together on the same samples, each distinct subexpression once: the simulator's controller
    reads every trigger of a role on each scrape, and they repeat their terms (the work, the mean prompt: a prefill
    role's three queries are 157 nodes, 62 of them distinct). Each node answers by its own ``apply`` on its children's
    answers, as ``evaluate`` has it do; two nodes are one when they are the same type with the same fields (numbers
    compared by their bits) over the same children."""

    def __init__(self, queries: Sequence[Expr]) -> None:
        self.nodes: list[Expr] = []
        self.args: list[tuple[int, ...]] = []
        """Each node's children, as indices of earlier nodes."""
        index: dict[tuple[object, ...], int] = {}
        self.roots = [self._add(q, index) for q in queries]
        """Each query's node."""

    def _add(self, e: Expr, index: dict[tuple[object, ...], int]) -> int:
        args = tuple(self._add(c, index) for c in e.children())
        own = (getattr(e, f.name) for f in fields(cast(Any, e)))  # every node class is a dataclass
        key = (type(e), args, *(_exact(x) for x in own if not isinstance(x, Expr)))
        i = index.get(key)
        if i is None:
            i = index[key] = len(self.nodes)
            self.nodes.append(e)
            self.args.append(args)
        return i

    def evaluate(self, samples: Samples) -> list[Result]:
        """Each query's answer on ``samples``, in order."""
        out: list[Result] = []
        for node, args in zip(self.nodes, self.args, strict=True):
            out.append(node.apply(samples, [out[j] for j in args]))
        return [out[i] for i in self.roots]


def _exact(x: object) -> object:
    """A field as a key that tells apart what evaluates differently (``0.0 == -0.0``, but ``1 / -0.0`` is ``-Inf``)."""
    return x.hex() if isinstance(x, float) else x


# ---------------------------------------------------------------- parsing emitted queries

_TOKEN = re.compile(
    r"\s*(?:(?P<dur>[0-9]+[smhd](?![a-zA-Z0-9_:]))"
    r"|(?P<num>[0-9]+(?:\.[0-9]*)?(?:[eE][-+]?[0-9]+)?|\.[0-9]+(?:[eE][-+]?[0-9]+)?)"
    r"|(?P<name>[a-zA-Z_:][a-zA-Z0-9_:]*)"
    r"|(?P<sel>\{[^}]*\})"
    r"|(?P<win>\[[0-9]+[smhd](?::[0-9]+[smhd])?\])"
    r"|(?P<op>[-+*/(),>]))"
)
_SEL_MATCHER = re.compile(r'\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)\s*"([^"]*)"\s*(?:,|$)')


class ParseError(ValueError):
    pass


def _tokens(text: str) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    pos = 0
    while pos < len(text):
        if text[pos:].strip() == "":
            break
        m = _TOKEN.match(text, pos)
        if m is None or m.end() == pos:
            raise ParseError(f"cannot read the query at {text[pos:pos + 20]!r}")
        kind = m.lastgroup
        assert kind is not None
        out.append((kind, m.group(kind)))
        pos = m.end()
    return out


def _matchers(raw: str) -> tuple[Matcher, ...]:
    body = raw[1:-1].strip()
    out: list[Matcher] = []
    pos = 0
    while pos < len(body):
        m = _SEL_MATCHER.match(body, pos)
        if m is None:
            raise ParseError(f"cannot read the label matchers {raw!r}")
        out.append((m.group(1), m.group(2), m.group(3)))
        pos = m.end()
    return tuple(out)


class _Parser:
    def __init__(self, text: str) -> None:
        self.toks = _tokens(text)
        self.i = 0

    def peek(self) -> tuple[str, str] | None:
        return self.toks[self.i] if self.i < len(self.toks) else None

    def take(self, kind: str, value: str | None = None) -> str:
        t = self.peek()
        if t is None or t[0] != kind or (value is not None and t[1] != value):
            raise ParseError(f"expected {value or kind}, found {t[1] if t else 'the end'}")
        self.i += 1
        return t[1]

    def at(self, kind: str, value: str) -> bool:
        t = self.peek()
        return t is not None and t == (kind, value)

    def expr(self) -> Expr:
        e = self.comparison()
        while self.at("name", "or"):
            self.take("name", "or")
            self.take("name", "on")
            self.take("op", "(")
            self.take("op", ")")
            self.take("name", "vector")
            self.take("op", "(")
            default = float(self.take("num"))
            self.take("op", ")")
            e = Otherwise(e, default)
        return e

    def comparison(self) -> Expr:
        e = self.additive()
        while self.at("op", ">"):
            self.take("op", ">")
            e = Above(e, float(self.take("num")))
        return e

    def additive(self) -> Expr:
        e = self.multiplicative()
        while self.at("op", "+") or self.at("op", "-"):
            op = self.take("op")
            e = Binary(op, e, self.multiplicative())
        return e

    def multiplicative(self) -> Expr:
        e = self.atom()
        while self.at("op", "*") or self.at("op", "/"):
            op = self.take("op")
            e = Binary(op, e, self.atom())
        return e

    def offset(self) -> str | None:
        """A selector's ``offset <duration>`` modifier, if one follows."""
        if not self.at("name", "offset"):
            return None
        self.take("name", "offset")
        return self.take("dur")

    def function(self, name: str) -> Expr:
        """``clamp_min(v, n)``, ``clamp_max(v, n)``, ``ln(v)``, ``sqrt(v)`` or ``<stddev|avg>_over_time((v)[range:step])``, its name
        read."""
        self.take("op", "(")
        if name in OVER_TIME:
            self.take("op", "(")
            e = self.expr()
            self.take("op", ")")
            win = self.take("win")[1:-1]
            if ":" not in win:
                raise ParseError(f"{name} needs a subquery [range:step], not [{win}]")
            rng, step = win.split(":")
            self.take("op", ")")
            return OVER_TIME[name](e, rng, step)
        e = self.expr()
        if name in _UNARY:
            self.take("op", ")")
            return _UNARY[name](e)
        self.take("op", ",")
        bound = float(self.take("num"))
        self.take("op", ")")
        return ClampMin(e, bound) if name == "clamp_min" else ClampMax(e, bound)

    def atom(self) -> Expr:
        t = self.peek()
        if t is None:
            raise ParseError("the query ends early")
        if t[0] == "num":
            self.i += 1
            return Number(float(t[1]))
        if t == ("op", "("):
            self.i += 1
            e = self.expr()
            self.take("op", ")")
            return e
        if t == ("name", "sum"):
            self.i += 1
            self.take("op", "(")
            window: str | None = None
            if self.at("name", "rate"):
                self.take("name", "rate")
                self.take("op", "(")
                metric, matchers = self.take("name"), _matchers(self.take("sel"))
                window = self.take("win")[1:-1]
                offset = self.offset()
                self.take("op", ")")
            else:
                metric, matchers = self.take("name"), _matchers(self.take("sel"))
                offset = self.offset()
            self.take("op", ")")
            return Series(metric, matchers, window, offset)
        if t[0] == "name" and t[1] in _FUNCTIONS:
            self.i += 1
            return self.function(t[1])
        raise ParseError(
            f"unexpected {t[1]!r}: only sum(), sum(rate()) (with offset), clamp_min(), clamp_max(), ln(), sqrt(), stddev_over_time(), avg_over_time(), numbers and + - * / > or are read"
        )


_UNARY: dict[str, type[Ln] | type[Sqrt]] = {"ln": Ln, "sqrt": Sqrt}
"""The functions of one operand the parser reads, by name."""
_FUNCTIONS = ("clamp_min", "clamp_max", *_UNARY, *OVER_TIME)


def parse(text: str) -> Expr:
    """The expression tree of a query in the subset above (raises ``ParseError`` on anything else)."""
    p = _Parser(text)
    e = p.expr()
    if p.peek() is not None:
        raise ParseError(f"unexpected {p.peek()!r} after a complete query")
    return e
