"""Database connections and units of work."""
