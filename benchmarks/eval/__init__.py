"""Public retrieval evaluation (see run.py)."""
