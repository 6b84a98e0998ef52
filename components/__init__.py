"""Pulumi ComponentResources, one per module, importable as ``gpuscale.components``."""
