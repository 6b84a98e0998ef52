"""Jinja2 templates for generated documents (shipped as ``gpuscale.templates``)."""
