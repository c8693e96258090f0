"""The plugin manager (pluggy): third-party entry points, then the built-ins.
"""
