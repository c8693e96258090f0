"""The knowledge base: named contexts of documents beside the project index (seeds 000, 002).

- :mod:`~contextd.knowledge.contexts`: context names, rules, create/list/show/delete;
- :mod:`~contextd.knowledge.readers`: a document's text, one module per format;
- :mod:`~contextd.knowledge.documents`: adding files and folders (stored once, BLAKE3);
- :mod:`~contextd.knowledge.membership`: taking documents out of contexts;
- :mod:`~contextd.knowledge.safety`: refused paths and the roots an agent may add from;
- :mod:`~contextd.knowledge.scope`: contexts → the scope of a query, hits → documents/pages;
- :mod:`~contextd.knowledge.service`: :class:`KnowledgeBase`, what the Engine calls.

Documents are stored as files of the ``kb://`` namespace in the same tables as the project's
files, so one query path ranks both (DESIGN.md); see docs/ARCHITECTURE.md.
"""
