"""HTTP routes, one module per domain; ``ROUTERS`` lists them for ``create_app``."""
