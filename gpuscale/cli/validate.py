"""``gpuscale validate`` and ``gpuscale schema``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table
from rich.text import Text

from gpuscale import reservation_shares
from gpuscale.cli.common import (
    StackFileOpt,
    StackOpt,
    check_outputs,
    checked_sizing,
    console,
    say,
    source_of,
    spec_from_options,
    warn,
    write_text,
)
from gpuscale.problems import NAMESPACE
from gpuscale.sizing import PlatformSizing
from gpuscale.spec.platform import PlatformSpec
from gpuscale.stack_warnings import stack_warnings


def validate(stack: StackOpt = None, stack_file: StackFileOpt = None) -> None:
    """Check a stack file and print the spec summary and the derived sizing.

    Every refusal names the file and the YAML path of the value to change (gpuscale:models[0].slo.ttft_p99_s: ...).
    """
    spec = spec_from_options(stack, stack_file)
    sizing = checked_sizing(spec, source_of(stack, stack_file))
    env = spec.environment
    console.print(Text.assemble(
        (env.name, "bold"), f" ({env.stage}) cluster ", (env.cluster_name, "bold"), f" in {env.aws_region}, "
        f"Kubernetes {env.kubernetes_version}, zones {', '.join(spec.topology.zones)}",
    ), soft_wrap=True)
    say("GPU pools: " + ", ".join(
        f"{p.name} ({'/'.join(p.instance_types)}, {'/'.join(p.capacity_types)}, {p.gpu_limit} GPUs, "
        f"{p.consolidation_policy} after {p.consolidate_after})" for p in spec.topology.gpu_pools
    ))
    say(f"Leaf queues: {', '.join(spec.leaf_queue_names())}")
    console.print(sizing_table(sizing))
    console.print(role_table(sizing))
    if any(m.front_door is not None for m in sizing.models):
        console.print(front_door_table(sizing))
    if any(r.headroom is not None and r.headroom.mode != "none" for m in sizing.models for r in m.roles):
        console.print(headroom_table(sizing))
    held = reservation_shares.shares(spec, sizing.models)
    if held:
        console.print(reservation_table(held))
    for warning in stack_warnings(spec, sizing):
        warn(warning)
    say("valid", style="green")


def sizing_table(sizing: PlatformSizing) -> Table:
    t = Table(title="Sizing per model (one replica)")
    for col in ("model", "weights GiB", "KV B/token", "KV tokens/replica", "TP x PP", "GPUs", "nodes",
                "instance", "prefill tok/s", "decode batch", "cold start s", "GPU-h/day", "$/day"):
        t.add_column(col, justify="right" if col not in ("model", "instance") else "left")
    for m in sizing.models:
        s = m.shape
        t.add_row(
            m.model, f"{m.weights_gib:.1f}", str(m.kv_bytes_per_token), f"{m.kv_capacity_tokens:,}",
            f"{s.tensor_parallel_size} x {s.pipeline_parallel_size}", str(s.gpus), str(s.nodes), s.instance_type,
            f"{m.prefill_tokens_per_s:,.0f}", str(m.decode_batch_at_slo), f"{m.cold_start.total_s:.0f}",
            f"{m.gpu_hours_per_day:.0f}", f"{m.usd_per_day:,.0f}",
        )
    return t


def role_table(sizing: PlatformSizing) -> Table:
    t = Table(title="Autoscaling per role")
    for col in ("model", "role", "metric", "target", "replicas base/peak", "min", "max", "scale-down window s"):
        t.add_column(col)
    for m in sizing.models:
        for r in m.roles:
            metric = " + ".join(x.label for x in r.signals)
            target = " / ".join(f"{x.target:g}" for x in r.signals)
            t.add_row(m.model, r.role, metric, target, f"{r.replicas_at_base}/{r.replicas_at_peak}",
                      str(r.min_replicas), str(r.max_replicas), str(r.scale_down_stabilization_s))
    return t


def front_door_table(sizing: PlatformSizing) -> Table:
    t = Table(title="Front door (holds requests while the model wakes from zero)")
    for col in ("model", "first answer from zero s", "request timeout s", "stage to speed up", "hold limit s",
                "queue bound", "held per replica", "Retry-After s (503, from zero)", "Retry-After s (429, saturated)",
                "idle window s"):
        t.add_column(col, justify="left" if col in ("model", "stage to speed up") else "right")
    for m in sizing.models:
        d = m.front_door
        if d is None:
            continue
        fa = d.first_answer
        t.add_row(m.model, f"{fa.total_s:.0f}", f"{fa.request_timeout_s:g}", f"{fa.slowest_stage}: {fa.speed_up}",
                  str(d.hold_limit_s), f"{d.queue_bound:,}", f"{d.per_replica:,}", str(d.retry_after_s),
                  str(d.retry_after_saturated_s), str(d.idle_window_s))
    return t


def headroom_table(sizing: PlatformSizing) -> Table:
    t = Table(title="Headroom (spare GPU nodes for scale-ups, gpuscale.headroom)")
    for col in ("model", "role", "mode", "N replicas", "nodes", "burst req/s", "node wait s", "load s", "GPU-h/day",
                "$/day", "emitted", "why"):
        t.add_column(col, justify="left" if col in ("model", "role", "mode", "emitted", "why") else "right")
    for m in sizing.models:
        for r in m.roles:
            h = r.headroom
            if h is None or h.mode == "none":
                continue
            t.add_row(m.model, r.role, h.mode, str(h.replicas), str(h.nodes), f"{h.burst_rps:,.1f}",
                      f"{h.node_wait_s:.0f}", f"{h.load_s:.0f}", f"{h.gpu_hours_per_day:,.0f}", f"{h.usd_per_day:,.0f}",
                      "yes" if h.emitted else "no", h.why)
    return t


def schema(
    out: Annotated[
        Path | None, typer.Option("--out", help="Write here instead of stdout.", dir_okay=False, show_default=False)
    ] = None,
) -> None:
    """Write the JSON Schema of a stack file (editor completion for stacks/Pulumi.*.yaml)."""
    check_outputs((out, "--out", False))
    fields = PlatformSpec.model_json_schema()
    defs = fields.pop("$defs", {})
    props = {f"{NAMESPACE}:{k}": v for k, v in fields["properties"].items()}
    doc = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "gpuscale Pulumi stack file",
        "type": "object",
        "properties": {
            "config": {
                "type": "object",
                "properties": props,
                "required": [f"{NAMESPACE}:{k}" for k in fields.get("required", [])],
            },
            "secretsprovider": {"type": "string"},
            "encryptedkey": {"type": "string"},
        },
        "required": ["config"],
        "$defs": defs,
    }
    text = json.dumps(doc, indent=2, sort_keys=True) + "\n"
    if out is None:
        typer.echo(text, nl=False)
    else:
        write_text(out, text, "--out")
        say(f"wrote {out}")


def reservation_table(held: dict[str, reservation_shares.ReservationShare]) -> Table:
    """Each pool's reserved instances billed once, and the part each model's simulation runs in and is charged
    (``gpuscale.reservation_shares``)."""
    t = Table(title="Capacity reservations (billed once per pool, used or not; split by GPUs at peak)")
    for col in ("pool", "instance", "reserved", "$/h", "$/day", "model", "GPUs at peak", "its share", "its $/h"):
        t.add_column(col, justify="left" if col in ("pool", "instance", "model") else "right")
    seen: set[tuple[str, str]] = set()
    for s in sorted(held.values(), key=lambda s: (s.pool, s.instance_type)):  # stable: models in stack order
        first = (s.pool, s.instance_type) not in seen
        seen.add((s.pool, s.instance_type))
        t.add_row(s.pool if first else "", s.instance_type if first else "", str(s.pool_instances) if first else "",
                  f"{s.pool_usd_per_hour:,.2f}" if first else "", f"{s.pool_usd_per_hour * 24:,.0f}" if first else "",
                  s.model, str(s.peak_gpus), str(s.instances), f"{s.usd_per_hour:,.2f}")
    return t
