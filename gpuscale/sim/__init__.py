"""Discrete-event simulator of the three autoscaling layers (nodes, scheduling, replicas)."""
