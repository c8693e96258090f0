"""The query capability: a task's text in, ranked snippets under a token budget out.

:mod:`contextd.query.pipeline` runs the stages in order; the other modules are the stages
and the records they pass.
"""
