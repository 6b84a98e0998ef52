"""The plan document: ``outputs/skill-gpu-autoscaler-plan.md`` rendered from spec, sizing, synth and simulation."""
