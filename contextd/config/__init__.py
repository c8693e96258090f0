"""Configuration: context.toml's typed sections, their loading and checks, the environment
overlay, and the Project they belong to.
"""
