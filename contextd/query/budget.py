"""BudgetManager: how many tokens of context a task gets.

The base is ``budget.default_max_tokens``; complex tasks get more, simple ones less;
architecture work more, bug fixes less. ``reserve_for_prompt`` is held back from the snippets,
and a usage note is produced when a context fills more than ``warn_threshold_percent`` of what
it may use.
"""

from __future__ import annotations

import enum
import logging

from contextd.config.sections import BudgetConfig
from contextd.records import TokenBudget

log = logging.getLogger(__name__)

HIGH_COMPLEXITY_MIN = 8
LOW_COMPLEXITY_MAX = 3
HIGH_COMPLEXITY_FACTOR = 1.5
LOW_COMPLEXITY_FACTOR = 0.7
DIVERSITY_WEIGHT = 0.5


class TaskType(str, enum.Enum):
    """Kinds of task an orchestrator hands out."""

    ARCHITECTURE = "ARCHITECTURE"
    IMPLEMENTATION = "IMPLEMENTATION"
    BUGFIX = "BUGFIX"
    REFACTORING = "REFACTORING"
    TESTING = "TESTING"
    DOCUMENTATION = "DOCUMENTATION"
    REVIEW = "REVIEW"
    OTHER = "OTHER"

    @classmethod
    def parse(cls, value: "TaskType | str | None") -> "TaskType":
        """A TaskType from an enum, a name in any case, or None (OTHER)."""
        if isinstance(value, cls):
            return value
        try:
            return cls(str(value or cls.OTHER.value).upper())
        except ValueError:
            return cls.OTHER


# Architecture needs the wide view; a bug fix is focused.
TASK_TYPE_FACTORS = {TaskType.ARCHITECTURE: 1.3, TaskType.BUGFIX: 0.8}


class BudgetManager:
    """Computes TokenBudgets from the [budget] configuration."""

    def __init__(self, config: BudgetConfig):
        self.config = config

    def calculate(self, complexity: int | None = None,
                  task_type: TaskType | str | None = None) -> TokenBudget:
        """The budget of a task: base × complexity factor × task-type factor."""
        factor = 1.0
        if complexity is not None and complexity >= HIGH_COMPLEXITY_MIN:
            factor *= HIGH_COMPLEXITY_FACTOR
        elif complexity is not None and complexity <= LOW_COMPLEXITY_MAX:
            factor *= LOW_COMPLEXITY_FACTOR
        factor *= TASK_TYPE_FACTORS.get(TaskType.parse(task_type), 1.0)
        return TokenBudget(max_tokens=round(self.config.default_max_tokens * factor),
                           reserve_for_prompt=self.config.reserve_for_prompt,
                           diversity_weight=DIVERSITY_WEIGHT)

    def for_snippets(self, max_tokens: int) -> TokenBudget:
        """A budget of exactly ``max_tokens`` for snippets (an explicit request: no reserve)."""
        return TokenBudget(max_tokens=max_tokens, reserve_for_prompt=0,
                           diversity_weight=DIVERSITY_WEIGHT)

    @staticmethod
    def available(budget: TokenBudget) -> int:
        """Tokens the snippets may take: the budget minus the prompt reserve."""
        return max(0, budget.max_tokens - budget.reserve_for_prompt)

    def log_usage(self, budget: TokenBudget, used: int) -> bool:
        """Log (at info, shown with ``-v``) when ``used`` passes the warn threshold of the
        budget; True when it did. Not a note of the answer: a full budget is the normal
        outcome, and the answer already says how many tokens it holds of how many."""
        available = self.available(budget)
        if not available or used * 100 < available * self.config.warn_threshold_percent:
            return False
        log.info("context uses %d of %d tokens (over %d%%)", used, available,
                 self.config.warn_threshold_percent)
        return True
