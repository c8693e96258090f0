"""Overview: what the index holds and who serves it."""

from __future__ import annotations

from contextd.web.layout import cards, esc, table

PATH = "/"
TITLE = "Overview"


async def body(request, ctx) -> str:
    stats = await ctx.call("stats")
    health = await ctx.call("schema_status")
    storage = stats.storage
    embeddings = sum((storage.get("embeddings_by_model") or {}).values())
    owner, indexing = stats.owner, stats.indexing
    figures = cards([
        ("files", storage.get("total_files")), ("chunks", storage.get("total_chunks")),
        ("embedded chunks", embeddings), ("store size (MB)", storage.get("db_size_mb")),
        ("errors / skips", storage.get("errors")),
        ("secrets redacted", storage.get("secrets_redacted"))])
    providers = table(["provider", "type", "enabled", "ready", "note"], [
        (p.get("id"), p.get("type"), p.get("enabled"), p.get("available"), p.get("pending"))
        for p in stats.providers], table_id="providers")
    languages = table(["language", "chunks"], sorted(
        stats.languages.items(), key=lambda item: -item[1]), table_id="languages")
    models = table(["embedding model", "vectors"],
                   (storage.get("embeddings_by_model") or {}).items())
    facts = table(["", ""], [
        ("project", ctx.project), ("indexing", indexing.get("text")),
        ("state", indexing.get("state")),
        ("embeddings pending", indexing.get("embeddings_pending")),
        ("last indexed", storage.get("last_indexed")),
        ("owner process", (f"pid {owner.get('pid')}" if owner.get("pid")
                           else "none (each process opens the shared store itself)")
         + (" (this manager)" if owner.get("this_process") else "")),
    ], table_id="facts")
    return (f"{_status(health)}{figures}{facts}<h2>Providers</h2>{providers}"
            f"<h2>Languages</h2>{languages}<h2>Embeddings</h2>{models}"
            f"{_configuration(ctx.handle.get().project.config)}")


def _status(health: dict) -> str:
    """Seed 002's index status and project statistics (the same as /schema-status)."""
    project, schema = health["project"], health["schema"]
    figures = cards([("files in project", project["totalFilesInProject"]),
                     ("indexed", project["indexedFiles"]),
                     ("not indexed", project["notIndexedFiles"]),
                     ("changed since indexed", project["modifiedFiles"]),
                     ("deleted", project["deletedFiles"])])
    valid = "valid" if schema["valid"] else f"expected {schema['expectedVersion']}"
    return (f'<h2>Index status: <span id="index-status">{esc(health["status"])}</span></h2>'
            f"<p>{esc(health['advice'])}. Schema version {schema['version']} ({valid}); "
            f"{esc(schema['embeddingModel'])}, {schema['embeddingDimension']} dimensions.</p>"
            f"{figures}")


def _configuration(config) -> str:
    """The settings that differ from the defaults, the file they come from, and how to
    apply a change."""
    from contextd.config.compare import changed_keys
    from contextd.config.sections import ContextConfig

    flat = {}
    for key in changed_keys(ContextConfig(), config):
        section, _, rest = key.partition(".")
        value = getattr(config, section)
        for part in rest.split("."):
            value = value.get(part) if isinstance(value, dict) else getattr(value, part, None)
        flat[key] = value
    rows = table(["setting", "value"], flat.items(), table_id="settings") if flat else \
        "<p>Every setting has its default.</p>"
    notes = "".join(f"<li>{esc(str(n))}</li>" for n in config.notes)
    return ('<details id="configuration"><summary><h2 style="display:inline">Current '
            "configuration</h2></summary>"
            f"<p>From {esc(config.source or 'the defaults (no context.toml)')}. To change a "
            "setting, edit context.toml (<code>contextd init</code> writes every key with its "
            "meaning), check it with <code>contextd validate-config</code>, then apply it "
            "with the MCP tool <code>reload_config</code> or by restarting the server; this "
            "page shows the new settings after <code>stop_index_manager</code> and "
            "<code>open_index_manager</code>.</p>"
            + (f"<ul>{notes}</ul>" if notes else "") + rows + "</details>")

