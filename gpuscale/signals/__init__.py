"""Autoscaling signals as objects: one class per kind (its label, rationale, target, PromQL, trigger and the
simulator's observation), the vLLM metric names, and a model of KEDA's decision path over the emitted triggers.

Adding a signal is one class (``base.Signal``) added to ``selection.AnySignal`` and chosen in ``selection``.
"""
