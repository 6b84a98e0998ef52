"""The PNG snapshot: it renders the dashboard the dev stack's synth emits, panel for panel, with the simulator's series
of the same signals (each signal line is what the trigger's expression tree reads on the simulated scrape)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpuscale.dashboards import configmap
from gpuscale.dashboards.model_dashboard import model_dashboard
from gpuscale.dashboards.snapshot import main, render_png, simulate_series
from gpuscale.feasibility import checked_sizing
from gpuscale.spec.platform import PlatformSpec
from gpuscale.synth.render import SynthResult

SHORT_S = 1200.0
"""20 simulated minutes: enough for a ramp and a scale-up on dev, under a second of CPU."""


def test_the_render_of_the_synth_dashboard_draws_its_panels(tmp_path: Path, dev_spec: PlatformSpec,
                                                            stack_synths: dict[str, SynthResult]) -> None:
    model = dev_spec.models[0].name
    (emitted,) = [o for _, o in stack_synths["dev"].kubernetes_objects()
                  if o["kind"] == "ConfigMap" and o["metadata"]["name"] == configmap.config_map_name(model)]
    board_json = json.loads(next(iter(emitted["data"].values())))
    board = model_dashboard(dev_spec, checked_sizing(dev_spec), model)
    assert board.body() == board_json  # the dashboard rendered is the one the synth ships
    sim = simulate_series(dev_spec, model, duration_s=SHORT_S)
    path = tmp_path / "dashboard.png"
    titles = render_png(board, sim, path)
    assert titles == [p["title"] for p in board_json["panels"] if p["type"] != "row"]
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert path.stat().st_size > 50_000  # panels with lines, not an empty canvas


def test_every_signal_panel_has_the_simulated_series_of_its_trigger(dev_spec: PlatformSpec) -> None:
    sizing = checked_sizing(dev_spec)
    model = dev_spec.models[0].name
    sim = simulate_series(dev_spec, model, duration_s=SHORT_S)
    board = model_dashboard(dev_spec, sizing, model)
    signal_panels = [p for p in board.graphs() if p.measure.startswith("signal:")]
    assert len(signal_panels) == sum(len(r.signals) for r in sizing.model(model).roles)
    for panel in signal_panels:
        ((_, values),) = sim.lines[panel.measure]
        assert len(values) == len(sim.t_s) and all(v is not None and v >= 0 for v in values)
    (load,) = [p for p in signal_panels if p.measure.endswith(":load-slo")]
    assert max(v or 0.0 for _, vs in sim.lines[load.measure] for v in vs) > 0  # traffic arrived and the signal saw it
    for key in ("replicas:aggregated", "kv:aggregated", "door:held", f"pool_gpus:{dev_spec.models[0].node_pool}"):
        assert key in {p.measure for p in board.graphs()} and sim.lines[key]


def test_the_snapshot_command_writes_one_png_per_model(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["/nonexistent/stack.yaml", str(tmp_path)]) == 2
    assert main([]) == 2
    assert "usage" in capsys.readouterr().err
