"""Writes of the runs app, one module per entity (``deployments``, ...)."""
