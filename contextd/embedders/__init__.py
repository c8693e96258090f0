"""Built-in embedders (placeholder until its issue lands)."""
