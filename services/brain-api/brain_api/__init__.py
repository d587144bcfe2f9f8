"""The brain HTTP API (FastAPI). ``create_app(settings)`` builds it."""
