"""The token-reduction report, from the task usage agents report.

An agent (or its orchestrator) reports, per task, the prompt tokens it was sent
(``tokens_input``) and the tokens it answered (``tokens_output``), once for a run without
contextd (``before_integration``) and once with it (``after_integration``). The report is the
spec's "simple SQL" comparison: average input, output and total tokens per side, and
``reduction = (before total - after total) / before total``, overall and per task that has
both sides (the spec's "top tasks by savings"), against the 80% goal.
"""

from __future__ import annotations

from typing import Any, Iterable

from contextd.errors import UsageError

BEFORE, AFTER = "before_integration", "after_integration"
# The spellings dashboards' queries use, accepted for the same sides.
OP_ALIASES = {"before": BEFORE, "after": AFTER, BEFORE: BEFORE, AFTER: AFTER}
GOAL = 0.8
TOP_TASKS = 10


def check_report(op: str, task_id: str, tokens_input: int, tokens_output: int) -> str:
    """The canonical op of a report; UsageError naming what is wrong."""
    canonical = OP_ALIASES.get((op or "").strip().lower())
    if canonical is None:
        raise UsageError(f"op must be {BEFORE!r} (a run without contextd) or {AFTER!r} "
                         f"(with it), not {op!r}")
    if not (task_id or "").strip():
        raise UsageError("task_id is empty: name the task so before and after can be paired")
    for name, value in (("tokens_input", tokens_input), ("tokens_output", tokens_output)):
        if not isinstance(value, int) or value < 0:
            raise UsageError(f"{name} must be a whole number of tokens, 0 or more, "
                             f"not {value!r}")
    return canonical


def _side(rows: list[dict[str, Any]]) -> dict[str, Any] | None:
    if not rows:
        return None
    n = len(rows)
    tokens_in = sum(r["tokens_input"] for r in rows) / n
    tokens_out = sum(r["tokens_output"] for r in rows) / n
    context = [r["context_tokens"] for r in rows if r.get("context_tokens") is not None]
    return {"runs": n, "avg_input_tokens": round(tokens_in, 1),
            "avg_output_tokens": round(tokens_out, 1),
            "avg_total_tokens": round(tokens_in + tokens_out, 1),
            "avg_context_tokens": round(sum(context) / len(context), 1) if context else None}


def _reduction(before: dict | None, after: dict | None) -> float | None:
    if not before or not after or not before["avg_total_tokens"]:
        return None
    return round((before["avg_total_tokens"] - after["avg_total_tokens"])
                 / before["avg_total_tokens"], 4)


def token_reduction(rows: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """The report over task_usage rows (dicts with op, task_id, agent, tokens_input,
    tokens_output, context_tokens)."""
    rows = list(rows)
    by_op = {op: [r for r in rows if r["op"] == op] for op in (BEFORE, AFTER)}
    before, after = _side(by_op[BEFORE]), _side(by_op[AFTER])
    overall = _reduction(before, after)
    tasks = []
    for task_id in sorted({r["task_id"] for r in rows}):
        sides = [_side([r for r in by_op[op] if r["task_id"] == task_id])
                 for op in (BEFORE, AFTER)]
        if all(sides):
            tasks.append({"task_id": task_id, "before_total": sides[0]["avg_total_tokens"],
                          "after_total": sides[1]["avg_total_tokens"],
                          "reduction": _reduction(*sides)})
    tasks.sort(key=lambda t: -(t["reduction"] or 0))
    agents = sorted({r["agent"] for r in rows if r.get("agent")})
    return {"before": before, "after": after, "reduction": overall, "goal": GOAL,
            "meets_goal": None if overall is None else overall >= GOAL,
            "paired_tasks": len(tasks), "top_tasks": tasks[:TOP_TASKS], "agents": agents,
            "reports": len(rows),
            "note": None if overall is not None else (
                "report both sides (op before_integration and after_integration) for the "
                "same tasks to measure the reduction")}


def reduction_text(report: dict[str, Any]) -> str:
    """The report as ``contextd`` prints it."""
    lines = []
    for title, side in (("Before Context Integration", report["before"]),
                        ("After Context Integration", report["after"])):
        lines.append(f"{title}:")
        if side is None:
            lines.append("- no runs reported")
            continue
        lines += [f"- Avg Input Tokens: {side['avg_input_tokens']:g}",
                  f"- Avg Output Tokens: {side['avg_output_tokens']:g}",
                  f"- Total: {side['avg_total_tokens']:g}  ({side['runs']} runs)"]
    if report["reduction"] is None:
        lines.append(report["note"])
    else:
        verdict = "meets" if report["meets_goal"] else "misses"
        lines.append(f"Reduction: {report['reduction']:.0%} ({verdict} the "
                     f"{report['goal']:.0%} goal; {report['paired_tasks']} task(s) with both)")
    return "\n".join(lines)
