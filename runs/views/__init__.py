"""HTML pages of the runs app, one module per resource (``deployments``, ...)."""
