"""The injection records and the holdout trial's adapters (ADR 0050); the rules are ``brain_core.trial``."""
