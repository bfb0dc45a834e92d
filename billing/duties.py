"""billing's rows in the leading controller's duty table (`cluster.controller.add_duties`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from billing.budgets import evaluate_budgets
from cluster.duties import Duty

if TYPE_CHECKING:
    from cluster.controller import Controller

BUDGETS_EVERY_S = 60.0
"""Budget thresholds are checked this often: a month's budget moves by little in a minute,
and each check folds the month's segments of every team with a budget."""


def controller_duties(controller: Controller) -> list[Duty]:
    return [Duty("budgets", BUDGETS_EVERY_S, evaluate_budgets, "budget thresholds: tell the leads")]
