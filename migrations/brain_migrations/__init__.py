"""Alembic environment of the index schema (packaged so ``brain migrate`` finds it when installed)."""
