"""The project facade: one object over the query pipeline, the knowledge base and memory.
"""
