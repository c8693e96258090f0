"""The Python API a caller imports: ContextModule.open in a deployment mode, and Memory.
"""
