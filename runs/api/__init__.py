"""REST API of the runs app, one module per resource (``deployments``, ...)."""
