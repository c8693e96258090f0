"""The project boundary: which files belong to the project, and paths a caller names.
"""
