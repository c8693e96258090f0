"""Text measures shared by chunkers, the full-text index and the ranking.
"""
