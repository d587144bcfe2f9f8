"""The keeper: a tick's deterministic pass, its LLM half, apply, intents, the drain."""
