"""``contextd tokens``: task token usage and the token-reduction report.

An orchestrator records each task run's tokens, once without contextd
(``before_integration``) and once with it (``after_integration``); ``contextd tokens
report`` prints the spec's before/after comparison and the reduction against the 80% goal.
"""

from __future__ import annotations

from typing import Any

import click

from contextd.cli.common import CliState, emit, open_engine, pass_state
from contextd.query.token_reduction import AFTER, BEFORE, reduction_text


def _run(state: CliState, call) -> Any:
    engine = open_engine(state)
    try:
        return call(engine)
    finally:
        engine.close()


@click.group("tokens")
def tokens_group() -> None:
    """Task token usage and the token-reduction report.

    \b
    Examples:
      contextd tokens add T-42 --op before_integration --input 5000 --output 2000
      contextd tokens add T-42 --op after_integration --input 1000 --output 400
      contextd tokens report
    """


@tokens_group.command("add")
@click.argument("task_id")
@click.option("--op", type=click.Choice([BEFORE, AFTER]), required=True,
              help="The run was without contextd (before) or with it (after).")
@click.option("--input", "tokens_input", type=click.IntRange(min=0), required=True,
              help="Prompt tokens the agent was sent.")
@click.option("--output", "tokens_output", type=click.IntRange(min=0), required=True,
              help="Tokens the agent answered.")
@click.option("--agent", help="Which agent, e.g. claude-code.")
@click.option("--context-tokens", type=click.IntRange(min=0),
              help="Of the input, the tokens of the <project_context> block.")
@click.option("--notes", help="Free text kept with the run.")
@pass_state
def add_command(state: CliState, task_id: str, op: str, tokens_input: int, tokens_output: int,
                agent: str | None, context_tokens: int | None, notes: str | None) -> None:
    """Record the tokens of one run of TASK_ID; prints the report including it."""
    report = _run(state, lambda e: e.report_task_usage(task_id, op, tokens_input,
                                                       tokens_output, agent, context_tokens,
                                                       notes))
    emit(state, report, lambda r: click.echo(reduction_text(r)))


@tokens_group.command("report")
@pass_state
def report_command(state: CliState) -> None:
    """The token-reduction report over every recorded run."""
    emit(state, _run(state, lambda e: e.token_reduction()),
         lambda r: click.echo(reduction_text(r)))
