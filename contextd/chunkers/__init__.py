"""Built-in chunkers (placeholder until its issue lands)."""
