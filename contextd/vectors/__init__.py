"""Vector arithmetic shared by the semantic provider and agent memory.
"""
