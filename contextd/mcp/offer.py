"""What a server offers at the handshake: the tool groups and the instructions that go with
them.

Kept apart from the tools (:mod:`contextd.mcp.app`) and free of the MCP SDK and pydantic,
because :mod:`contextd.mcp.prelude` answers ``initialize`` from it before the SDK has loaded,
and the SDK server builds its own answer from the same functions: one source, no drift.
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterable

from contextd.config.sections import MCP_TOOL_GROUPS, McpConfig
from contextd.errors import ContextdError, UsageError

# The tools every server offers: what an agent needs on every task. Every other tool is in
# one of the opt-in groups of ``[mcp] tools`` / ``serve --tools`` (MCP_TOOL_GROUPS), because
# each listed tool costs the agent context on every request (issue 39).
CORE = "core"
# The ``[mcp] compatibility`` profile with the older tool names some agents call
# (docs/MCP.md).
SEED002 = "seed002"

# What the server tells an agent at the handshake, one paragraph per group it offers.
INSTRUCTIONS = {
    CORE: "contextd indexes this project (code, docs, config) and answers with the few "
          "snippets that matter, ranked and cut to a token budget. Call query_context before "
          "reading files blindly or grepping for a concept; call refresh_context after editing "
          "files if results look stale (a watcher normally keeps the index current within a "
          "second). get_context_stats says what is indexed and whether indexing or the "
          "embedding model is still warming up.",
    "reports": "To research a question and write it up: search_knowledge (keeps results in a "
               "session), get_search_results (full text), then create_rag_report (a cited "
               "Markdown report; get_template_schema shows a template's variables).",
    "memory": "Agent memory: stash_context what you may need again (a traceback, a decision), "
              "retrieve_stashed_context it later by meaning, and merge_stashed_context it back.",
    "knowledge": "Knowledge contexts hold documents beside the code (knowledge_add); "
                 "knowledge_search searches them, query_context's contexts adds them to a "
                 "project search.",
    "contextual": "Contextual retrieval: reindex_with_context adds a context line to each "
                  "chunk; report_token_usage and get_token_reduction_report measure the "
                  "tokens saved.",
    "related": "find_related lists the code most like a function (near-copies that need "
               "the same change, code calling the same helpers).",
    "admin": "After an edit of context.toml, reload_config applies it without a restart; "
             "rebuild_context re-creates a corrupt index; open_index_manager opens the web "
             "Index Manager.",
}


def chosen_groups(names: Iterable[str]) -> frozenset[str]:
    """The groups a ``--tools`` list or ``[mcp] tools`` turns on, the core always among
    them; ``all`` is every group. An unknown name is refused with the known ones."""
    chosen = {CORE}
    for name in names:
        name = name.strip()
        if name == "all":
            chosen.update(MCP_TOOL_GROUPS)
        elif name in MCP_TOOL_GROUPS:
            chosen.add(name)
        elif name:
            raise UsageError(f"unknown MCP tool group {name!r}: the groups are "
                              f"{', '.join(MCP_TOOL_GROUPS)} (or all)")
    return frozenset(chosen)


def mcp_config(root: str | Path | None, config_path: str | Path | None) -> McpConfig:
    """``[mcp]`` of the project; a configuration that does not load gives the defaults (the
    engine then reports the error to every call)."""
    from contextd.config.project import Project

    try:
        return Project.open(root, config_path).config.mcp
    except (ContextdError, OSError):
        return McpConfig()


def offered_groups(config: McpConfig, tools: Iterable[str] | None = None) -> frozenset[str]:
    """The tool groups a server offers: ``tools`` (``serve --tools``) if given, else
    ``[mcp] tools``; the core always, and every group under the seed002 compatibility
    profile, which promises its agents the full set."""
    if config.compatibility == SEED002:
        return chosen_groups(["all"])
    return chosen_groups(config.tools if tools is None else tools)


def instructions(groups: Iterable[str]) -> str:
    """The handshake's instructions: the paragraph of each offered group, in a fixed order."""
    offered = set(groups)
    return "\n\n".join(text for group, text in INSTRUCTIONS.items() if group in offered)
