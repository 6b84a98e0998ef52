"""The holding, model-aware front door before a model: what the stack file may set (sizing derives the rest)."""

from __future__ import annotations

from pydantic import Field

from gpuscale.spec.base import Spec


class FrontDoorSpec(Spec):
    """llm-d's router (the standalone endpoint picker with flow control, behind its Envoy) in front of one model.

    At zero replicas it holds each request while the model wakes, but only as long as the request can still get its first
    token within ``slo.request_timeout_s``; past that, or beyond the queue bound, it answers 503 with ``Retry-After``.
    Its queue is the model's wake-up signal: a KEDA trigger scales every role from 0 to 1 on it. The hold limit, queue
    bound and ``Retry-After`` are derived by sizing (``docs/layer3-serving.md``, "The front door").
    """

    enabled: bool | None = None
    """``null`` (default): present when a role of the model may scale to zero (it is then the model's wake-up signal),
    absent otherwise; ``true``: also before a model that keeps warm replicas (prefix- and KV-aware routing, bursts held at
    the door by priority instead of queued inside one replica); ``false``: no front door (scale to zero then needs a
    ``wake_schedule``)."""
    idle_window_s: int = Field(default=900, ge=60, le=86_400)
    """The model scales back to zero only after this long with nothing held at the door, no prompt and no running
    sequence (the KEDA ``cooldownPeriod`` of every role). Its GPU node goes ``consolidate_after`` later."""
    poll_s: int = Field(default=5, ge=1, le=60)
    """How often Prometheus scrapes the door's queue and KEDA checks it (the ServiceMonitor interval and the roles'
    ``pollingInterval``): a request held at zero starts the cold start at most twice this late."""
