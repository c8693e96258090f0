"""The runtime: one project's engine, the process that owns its index and the ones that call it,
jobs, the watcher, backups, and the background hand-off.
"""
