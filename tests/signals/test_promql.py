"""The trigger PromQL subset: rendering, parsing back, and Prometheus' semantics on one-element vectors."""

from __future__ import annotations

import math

import pytest

from gpuscale.signals import promql
from gpuscale.signals.promql import Above, ClampMin, Matcher, Number, Otherwise, ParseError, Series, evaluate, parse

SEL: tuple[Matcher, ...] = (("namespace", "=", "ns"), ("gpuscale_io_role", "=", "decode"))


class Fixed:
    """Samples with fixed values; a metric missing from the dicts has no series."""

    def __init__(self, gauges: dict[str, float], rates: dict[str, float]) -> None:
        self.gauges, self.rates = gauges, rates

    def gauge_sum(self, metric: str, matchers: tuple[Matcher, ...]) -> float | None:
        return self.gauges.get(metric)

    def rate_sum(self, metric: str, matchers: tuple[Matcher, ...], window: str) -> float | None:
        return self.rates.get(metric)


def test_render_parenthesises_by_precedence_and_parses_back_to_the_same_tree() -> None:
    ratio = Series("h_sum", SEL, "1m") / Above(Series("h_count", SEL, "1m"), 0.0)
    e = Otherwise(Series("g", SEL) * (Number(2.0) + Number(3e-05) * Otherwise(ratio, 800.0)), 0.0)
    text = e.render()
    assert text == (
        'sum(g{namespace="ns",gpuscale_io_role="decode"}) * (2 + 3e-05 * (sum(rate(h_sum{namespace="ns",'
        'gpuscale_io_role="decode"}[1m])) / (sum(rate(h_count{namespace="ns",gpuscale_io_role="decode"}[1m])) > 0)'
        " or on() vector(800))) or on() vector(0)"
    )
    assert parse(text) == e
    # a right operand of the same strength keeps its parentheses: a / (b / c) is not a / b / c
    nested = Series("a", SEL) / (Series("b", SEL) / ClampMin(Series("c", SEL), 1.0))
    assert parse(nested.render()) == nested


def test_an_empty_operand_empties_the_expression_and_or_supplies_the_default() -> None:
    e = Series("g", SEL) * Number(2.0)
    assert evaluate(e, Fixed({}, {})) is None  # no series: empty, which KEDA reads as an error or as 0
    assert evaluate(Otherwise(e, 0.0), Fixed({}, {})) == 0.0
    assert evaluate(Otherwise(e, 0.0), Fixed({"g": 4.0}, {})) == 8.0


def test_division_by_zero_is_nan_and_a_filter_drops_it() -> None:
    ratio = Series("s", SEL, "1m") / Series("c", SEL, "1m")
    samples = Fixed({}, {"s": 0.0, "c": 0.0})
    value = evaluate(ratio, samples)
    assert value is not None and math.isnan(value)  # 0/0: what a latency ratio over no requests answers
    assert evaluate(Series("s", SEL, "1m") / Series("c", SEL, "1m"), Fixed({}, {"s": 1.0, "c": 0.0})) == math.inf
    guarded = Otherwise(Series("s", SEL, "1m") / Above(Series("c", SEL, "1m"), 0.0), 0.0)
    assert evaluate(guarded, samples) == 0.0
    assert evaluate(guarded, Fixed({}, {"s": 3.0, "c": 2.0})) == 1.5
    assert evaluate(ClampMin(Series("g", SEL), 1.0), Fixed({"g": 0.2}, {})) == 1.0


def test_parse_refuses_what_the_subset_does_not_cover() -> None:
    for bad in ('avg(x{a="b"})', 'sum(x{a="b"}) by (pod)', 'sum(x{a="b"}) >', "sum(x)", 'sum(x{a="b"}) and on() vector(1)'):
        with pytest.raises(ParseError):
            parse(bad)


def test_leaves_are_every_selector_read() -> None:
    e = parse('sum(a{r="x"}) + sum(rate(b{r="y"}[5m])) or on() vector(0)')
    assert [(x.metric, x.matchers, x.window) for x in e.leaves()] == [("a", (("r", "=", "x"),), None), ("b", (("r", "=", "y"),), "5m")]
    assert isinstance(e, promql.Otherwise)


class WithPast(Fixed):
    """Samples of gauge ``g`` at ``values[k]`` k minutes ago (index 0 now)."""

    def __init__(self, values: list[float], k: int = 0) -> None:
        super().__init__({"g": values[k]}, {})
        self.values, self.k = values, k

    def at(self, ago_s: float) -> WithPast | None:
        k = self.k + round(ago_s / 60.0)
        return WithPast(self.values, k) if k < len(self.values) else None


def test_subquery_clamp_max_and_ln_render_parse_and_evaluate_as_prometheus() -> None:
    g = Series("g", SEL)
    e = promql.StddevOverTime(g * 2.0, "5m", "1m") + promql.ClampMin(promql.Ln(promql.ClampMax(g, 1.0) / 0.01), 0.0)
    text = e.render()
    assert 'stddev_over_time((sum(g{namespace="ns",gpuscale_io_role="decode"}) * 2)[5m:1m])' in text
    assert "clamp_min(ln(clamp_max(sum(g{" in text
    assert parse(text) == e
    # five one-minute points 2, 4, 4, 4, 6 (x 2): population standard deviation sqrt(1.6); ln(min(1, 1)/0.01)
    past = WithPast([1.0, 2.0, 2.0, 2.0, 3.0, 99.0])
    assert evaluate(e, past) == pytest.approx(math.sqrt(1.6) + math.log(100.0))
    # only three points exist yet (Prometheus scraped three minutes): the range holds those
    assert evaluate(promql.StddevOverTime(g, "5m", "1m"), WithPast([1.0, 2.0, 3.0])) == pytest.approx(math.sqrt(2 / 3))
    # samples without a past: the present point alone, stddev 0; ln(0) is -Inf, clamped to 0
    assert evaluate(promql.StddevOverTime(g, "1h", "1m"), Fixed({"g": 5.0}, {})) == 0.0
    assert evaluate(promql.ClampMin(promql.Ln(g), 0.0), Fixed({"g": 0.0}, {})) == 0.0
    with pytest.raises(ParseError, match="subquery"):
        parse('stddev_over_time((sum(g{a="b"}))[5m])')


def test_a_plan_answers_each_query_as_its_own_evaluation() -> None:
    """Shared terms are answered once, and only terms that evaluate alike are shared: ``1 / 0`` and ``1 / -0`` are
    equal trees to ``==`` (``0.0 == -0.0``) but not to the plan."""
    g, r = Series("g", SEL), Series("r", SEL, "1m")
    ratio = Otherwise(g / Above(r, 0.0), 7.0)
    queries = [
        Number(1.0) / Number(0.0), Number(1.0) / Number(-0.0), ratio * ratio + promql.Ln(ratio), ClampMin(ratio, 0.5),
        Otherwise(Series("g", SEL) / Above(Series("r", SEL, "1m"), 0.0), 7.0),  # equal to ``ratio``, built again
    ]
    plan = promql.Plan(queries)
    assert len(plan.nodes) < sum(1 for q in queries for _ in _walk(q))
    for samples in (Fixed({"g": 3.0}, {"r": 2.0}), Fixed({"g": 3.0}, {"r": 0.0}), Fixed({}, {}), Fixed({"g": -1.0}, {"r": 4.0})):
        # repr: NaN reads as itself, -0.0 apart from 0.0
        assert [repr(promql.value_of(a)) for a in plan.evaluate(samples)] == [repr(evaluate(q, samples)) for q in queries]
    assert [promql.value_of(a) for a in plan.evaluate(Fixed({}, {}))][:2] == [math.inf, -math.inf]


def _walk(e: promql.Expr) -> list[promql.Expr]:
    return [e, *(n for c in e.children() for n in _walk(c))]


def test_offset_renders_on_the_selector_parses_back_and_reads_the_past() -> None:
    g, r = Series("g", SEL), Series("c", SEL, "1m")
    e = promql.shifted(Otherwise(g * 2.0 + r, 0.0), "2m")
    text = e.render()
    # PromQL takes offset on a selector (after a range): never on a parenthesised expression
    assert text == ('sum(g{namespace="ns",gpuscale_io_role="decode"} offset 2m) * 2 + '
                    'sum(rate(c{namespace="ns",gpuscale_io_role="decode"}[1m] offset 2m)) or on() vector(0)')
    assert parse(text) == e
    assert e.reach_s() == 120.0
    past = WithPast([1.0, 2.0, 5.0, 7.0])
    assert evaluate(promql.shifted(g, "2m"), past) == 5.0
    # no samples that old (or no past at all): the selector is empty, as Prometheus' is
    assert evaluate(promql.shifted(g, "5m"), past) is None
    assert evaluate(promql.shifted(g, "1m"), Fixed({"g": 1.0}, {})) is None


def test_an_offset_inside_a_subquery_is_relative_to_each_point() -> None:
    g = Series("g", SEL)
    change = g - promql.shifted(g, "2m")
    e = promql.AvgOverTime(change, "3m", "1m")
    assert e.reach_s() == 300.0  # the range and the offset before it: what an evaluator keeps
    # points now, 1 and 2 minutes ago: 1 - 5, 2 - 7, 5 - 11; a point whose offset has no sample has none
    assert evaluate(e, WithPast([1.0, 2.0, 5.0, 7.0, 11.0])) == pytest.approx((-4 - 5 - 6) / 3)
    assert evaluate(e, WithPast([1.0, 2.0, 5.0, 7.0])) == pytest.approx((-4 - 5) / 2)
    assert evaluate(e, WithPast([1.0, 2.0])) is None
    with pytest.raises(ValueError, match="subquery"):
        promql.shifted(e, "1m")
    with pytest.raises(ValueError, match="already"):
        promql.shifted(promql.shifted(g, "1m"), "1m")
    with pytest.raises(ParseError):
        parse('sum(g{a="b"} offset 1h30m)')  # one unit only: what the renderer writes
    assert [promql.duration(s) for s in (300.0, 90.0, 3600.0)] == ["5m", "90s", "1h"]
