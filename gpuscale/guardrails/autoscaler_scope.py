"""One autoscaler per role: never one over prefill and decode together.

Prefill saturates on queued prompt tokens, decode on KV-cache blocks and step time, so one signal over both roles
scales the wrong one: the prefill queue grows while decode's KV use reads low, or the other way round. The spec refuses
``scope: whole_model`` on a disaggregated model; the policy pack refuses any autoscaler whose query or selector names
both roles.
"""

from __future__ import annotations

import re

_PREFILL = re.compile(r"\bprefill\b")
_DECODE = re.compile(r"\bdecode\b")

WHY = (
    "prefill saturates on queue depth and decode on KV-cache use, so one signal over both scales the wrong role"
)


def spans_both_roles(text: str) -> bool:
    """Whether an autoscaler's query or selector names both the prefill and the decode role."""
    return bool(_PREFILL.search(text) and _DECODE.search(text))


def whole_model_message(subject: str) -> str:
    """Why ``subject`` (what puts both roles behind one autoscaler) is refused, and the fix."""
    return f"{subject} puts prefill and decode behind one autoscaler; {WHY}. Use one autoscaler per role"
