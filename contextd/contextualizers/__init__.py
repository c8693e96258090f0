"""Built-in contextualizers (placeholder until its issue lands)."""
