"""Offline rendering of a Pulumi program under deterministic mocks."""
