"""gpuscale's refusal rules, each defined once: the trap, its threshold, the override that accepts it, the message.

Every reader imports the rule from here instead of restating it: the spec validators (``gpuscale.spec``), the
feasibility checks (``gpuscale.feasibility``), the policy pack (``gpuscale.policy.rules``), the plan's checklist
(``gpuscale.plan.context``), the tuner's candidate sets (``gpuscale.tune.params``) and the autoscaler builders
(``gpuscale.manifests.autoscaling``). ``tests/test_guardrails_agree.py`` runs ``validate`` and the policy pack over
the same mutated stacks and asserts they agree.

- ``consolidation``: GPU pools are ``WhenEmpty`` with ``consolidate_after >= max(1h, cold start)``.
- ``warm_minimum``: a critical role keeps at least 2 replicas; the default minimum per criticality.
- ``autoscaler_metrics``: the signals no autoscaler may use (duty cycle, profiling counters, GPU memory, removed vLLM
  names).
- ``autoscaler_backend``: scale to zero, pause, warm schedules and the SLO guard need KEDA, not an HPA.
- ``autoscaler_scope``: one autoscaler per role, never one over prefill and decode.
- ``production``: production is ``environment.stage == "prod"``; there, AMIs are pinned.

The package imports nothing of gpuscale but ``labels`` and ``versions``, so the spec can use it without a cycle.
"""
