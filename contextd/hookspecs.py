"""Every hook contextd calls, each documented: this is the contract for plugin authors.

Plugins are found through the ``contextd`` entry-point group (third parties) and
``contextd.plugins.manager.DEFAULT_PLUGINS`` (built-ins, which use the very same hooks). All hooks are
*register-callback* hooks: the plugin receives a ``register`` function and calls it once per
thing it offers. Name clashes are resolved deterministically: the first registration of a name
wins, and third-party plugins are called before the built-ins (which are ``trylast``), so a
third party can replace a built-in by registering the same name.
"""

from __future__ import annotations

import pluggy

hookspec = pluggy.HookspecMarker("contextd")
hookimpl = pluggy.HookimplMarker("contextd")


@hookspec
def register_chunkers(register):
    """Offer chunkers.

    Call ``register(chunker)`` for each chunker object. A chunker has ``name`` (unique),
    ``language`` (the language id stored with its chunks), ``extensions`` (lower-case, with
    the dot, e.g. ``(".py", ".pyi")``), ``filenames`` (exact base names such as
    ``("Dockerfile",)``, may be empty) and a method
    ``chunk(text: str, path: str, settings: contextd.config.sections.LanguageChunking) -> list[Chunk]``
    that must be deterministic and must cover every non-blank line of ``text``.
    An optional ``version`` string names the chunker's cutting rules: an existing index is
    re-chunked when it changes (without one, when the plugin distribution's version does),
    and when a third-party chunker is installed or removed.
    Returns nothing.
    """


@hookspec
def register_providers(register):
    """Offer context providers.

    Call ``register(factory)`` where ``factory`` is a class (or callable with no arguments)
    producing an object with ``id``, ``name``, ``type`` (:class:`contextd.records.ProviderType`)
    and the methods ``initialize(context)``, ``is_available()``,
    ``query(query, scope, budget) -> list[ContextSnippet]`` and ``shutdown()``
    (see :mod:`contextd.providers.base`). ``factory.id`` must be readable
    without instantiating, so that disabled providers cost nothing. Returns nothing.
    """


@hookspec
def register_embedders(register):
    """Offer embedding backends.

    Call ``register(name, factory)``; ``factory(embedding_config)`` returns an object with
    ``identity`` (a string naming model, backend and quantisation: vectors from different
    identities are never mixed), ``dimension``, ``embed(texts) -> numpy.ndarray`` (float32,
    shape ``(len(texts), dimension)``, L2-normalised) and ``embed_query(text)``.
    The factory must not download anything. Returns nothing.
    """


@hookspec
def register_contextualizers(register):
    """Offer contextualizers: the stage between chunking and embedding that prefixes each chunk
    with document-level context.

    Call ``register(name, factory)``; ``factory(config)`` returns an object with ``name`` and
    ``prefixes(document: str, path: str, chunks: list[Chunk]) -> list[str]`` giving one prefix
    per chunk (empty string for none). Returns nothing.
    """
