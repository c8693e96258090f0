"""MCP tools of contextual retrieval and of the token usage agents report (the reduction
is computed by :mod:`contextd.query.token_reduction`).

Seed 003's five tools keep the seed's names and parameters: generate_context_for_chunk,
reindex_with_context, get_reindexing_progress, search_with_contextual_retrieval (with ``ab``:
the same query ranked with and without the prefixes side by side) and
get_contextual_retrieval_stats. report_token_usage lets an agent (or its orchestrator) record
a task run's tokens; get_token_reduction_report answers the spec's before/after comparison.
"""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal

from mcp_types import CallToolResult, TextContent
from pydantic import Field

from contextd.query.token_reduction import reduction_text
from contextd.mcp.tool_kinds import APPEND, READ, RESET, tool

def _answer(data: dict[str, Any], text: str) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=text)],
                          structured_content=data)


def _search_text(data: dict[str, Any]) -> str:
    lines = [f"{data['count']} of {data['total']} found for {data['query']!r} "
             f"(prefixes: {data['strategy']})"]
    for r in data["results"]:
        quality = r["metadata"]["context_quality"]
        lines.append(f"- {r['score']:.3f} {r['file_path']}:{r['start_line']}-{r['end_line']} "
                     f"{r['label']}" + (f" (prefix quality {quality:.2f})"
                                        if quality is not None else ""))
    ab = data.get("ab")
    if ab:
        lines.append(f"A/B, dense ranking of {ab['chunks_compared']} chunks "
                     f"({ab['contextualized_chunks']} with a prefix): {ab['overlap']} of "
                     f"{len(ab['with_context'])} in both top lists")
        for left, right in zip(ab["with_context"], ab["without_context"]):
            lines.append(f"  {left['rank']:>2}. with: {left['file_path']}:{left['start_line']}"
                         f" (#{left['other_rank'] or '-'} without) | without: "
                         f"{right['file_path']}:{right['start_line']}")
        lines += [f"  expected {e['path']}: #{e['rank_with_context']} with prefixes, "
                  f"#{e['rank_without_context']} without" for e in ab["expected"]]
    lines += [f"Note: {n}" for n in data.get("notes", []) + list((ab or {}).get("notes", []))]
    return "\n".join(lines)


class ContextualTools:
    """The tool functions; signatures and docstrings are the schemas and descriptions."""

    GROUP = "contextual"  # the tool group (`serve --tools contextual`)

    def __init__(self, handle: Any):
        self.handle = handle

    @tool(READ)
    def generate_context_for_chunk(
        self,
        chunk: Annotated[str, Field(min_length=1, max_length=200_000, description=(
            "The chunk to contextualize (an excerpt of the document)."))],
        document: Annotated[str, Field(min_length=1, max_length=2_000_000, description=(
            "The whole document the chunk comes from."))],
        metadata: Annotated[dict[str, Any] | None, Field(description=(
            "Document metadata: 'title' (or 'path'), 'type' (or 'language'), ..."))] = None,
        max_words: Annotated[int, Field(ge=10, le=500, description=(
            "Longest prefix accepted (words) by the quality check of an LLM prefix."))] = 100,
    ) -> CallToolResult:
        """Generate the contextual prefix of one chunk of a document with this project's
        contextualizer (structural by default; the LLM when configured), exactly as
        indexing would prefix it. Returns success, chunk, context (the prefix),
        contextualized (prefix + chunk), quality_score (0-1: length, key terms of the
        chunk mentioned, no generic phrase), token_count (tokens of the prefix), strategy.
        """
        data = self.handle.get().generate_context_for_chunk(chunk, document, metadata,
                                                            max_words)
        return _answer(data, f"{data['strategy']} prefix (quality {data['quality_score']}, "
                             f"{data['token_count']} tokens):\n{data['context']}")

    @tool(RESET)
    def reindex_with_context(
        self,
        batch_size: Annotated[int | None, Field(ge=1, description=(
            "Chunks per embedding batch; contextd's [embedding] batch_size (omit it, or "
            "give the configured value)."))] = None,
        max_workers: Annotated[int | None, Field(ge=1, description=(
            "LLM requests in flight; contextd's [contextualizer] llm_concurrency (omit it, "
            "or give the configured value)."))] = None,
        llm_provider: Annotated[Literal["structural", "ollama", "openai", "none"] | None,
                                Field(description=(
            "Which contextualizer must write the prefixes; it must be the configured one "
            "([contextualizer] strategy / llm_api), else the call says what to set."))]
        = None,
        run_async: Annotated[bool, Field(validation_alias="async", description=(
            "true: return at once (poll get_reindexing_progress); false: wait."))] = True,
    ) -> CallToolResult:
        """Re-index every file with contextual prefixes, as a tracked and resumable job (a
        full rebuild: queries keep working but see fewer results until it ends). LLM
        prefixes of unchanged chunks come from the prefix cache, so a repeated or resumed
        re-index asks the LLM nothing twice. Returns the job id and its progress.
        """
        data = self.handle.get().reindex_with_context(batch_size, max_workers, llm_provider,
                                                      wait=not run_async)
        return _answer(data, data["message"])

    @tool(READ)
    def get_reindexing_progress(self) -> CallToolResult:
        """Progress of the latest reindex_with_context job: status, total_entities (files),
        processed, failed, percentage, elapsed_seconds, estimated_remaining_seconds."""
        data = self.handle.get().reindexing_progress()
        text = data.get("message") or (
            f"{data['status']}: {data['processed']} of {data['total_entities']} files "
            f"({data['percentage']}%), {data['failed']} failed")
        return _answer(data, text)

    @tool(READ)
    def search_with_contextual_retrieval(
        self,
        query: Annotated[str, Field(min_length=1, max_length=2000, description=(
            "What you are looking for."))],
        limit: Annotated[int, Field(ge=1, le=100, description="Most results.")] = 10,
        score_threshold: Annotated[float | None, Field(ge=0.0, le=1.0, description=(
            "Drop results scoring below this (0-1)."))] = None,
        ab: Annotated[bool, Field(description=(
            "Also rank every chunk by meaning with and without its contextual prefix, side "
            "by side (each result's rank in the other list): what the prefixes change on "
            "this project. The first comparison embeds the chunk texts once."))] = False,
        expected_paths: Annotated[list[str] | None, Field(max_length=50, description=(
            "With ab: files you know answer the query (root-relative); the answer gives the "
            "rank of each one's best chunk with and without prefixes."))] = None,
    ) -> CallToolResult:
        """Search the contextualized chunks (the hybrid search query_context runs), each
        result with its prefix ('context'), the prefix's quality and tokens in metadata;
        with ab=true also the A/B comparison with and without prefixes.
        """
        data = self.handle.get().contextual_search(query, limit, score_threshold, ab,
                                                   expected_paths or ())
        return _answer(data, _search_text(data))

    @tool(READ)
    def get_contextual_retrieval_stats(self) -> CallToolResult:
        """Contextual retrieval in this index: status, strategy, LLM provider, chunks with a
        prefix of all chunks, mean prefix length (tokens) and quality, quality bands, LLM
        tokens used and estimated cost over the recorded indexing runs."""
        data = self.handle.get().contextual_stats()
        return _answer(data, json.dumps(data, indent=1))

    @tool(APPEND)
    def report_token_usage(
        self,
        task_id: Annotated[str, Field(min_length=1, max_length=200, description=(
            "The task the run was for (pairs a run without contextd with one with it)."))],
        op: Annotated[Literal["before_integration", "after_integration", "before", "after"],
                      Field(description=(
            "before_integration: the task run without contextd; after_integration: with "
            "it."))],
        tokens_input: Annotated[int, Field(ge=0, description=(
            "Prompt tokens the agent was sent for the task."))],
        tokens_output: Annotated[int, Field(ge=0, description=(
            "Tokens the agent answered."))],
        agent: Annotated[str | None, Field(max_length=100, description=(
            "Which agent, e.g. 'claude-code', 'codex-cli'."))] = None,
        context_tokens: Annotated[int | None, Field(ge=0, description=(
            "Of tokens_input, the tokens of the <project_context> block."))] = None,
        notes: Annotated[str | None, Field(max_length=2000, description="Free text.")]
        = None,
    ) -> CallToolResult:
        """Report the tokens one task run used, so the token reduction
        contextd brings can be measured as the spec defines it: report a run without
        contextd (before_integration) and one with it (after_integration) for the same
        task_id. Returns the token-reduction report including this run.
        """
        data = self.handle.get().report_task_usage(task_id, op, tokens_input, tokens_output,
                                                   agent, context_tokens, notes)
        return _answer(data, reduction_text(data))

    @tool(READ)
    def get_token_reduction_report(self) -> CallToolResult:
        """The token-reduction report over the reported task runs:
        average input, output and total tokens before and after context integration, the
        reduction ((before - after) / before, goal 80%) and the top tasks by savings."""
        data = self.handle.get().token_reduction()
        return _answer(data, reduction_text(data))
