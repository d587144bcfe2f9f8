"""Keeper ticks: the queue, health, the LLM, the event bus."""
