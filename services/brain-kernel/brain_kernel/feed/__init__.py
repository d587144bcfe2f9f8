"""Feed queries, stored answers."""
