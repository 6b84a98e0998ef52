"""Simulator (being restructured)."""
