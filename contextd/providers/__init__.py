"""Built-in providers (placeholder until its issue lands)."""
