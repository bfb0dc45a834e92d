from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class BillingConfig(AppConfig):
    name = "billing"
    verbose_name = _("Usage and billing")

    def ready(self) -> None:
        from billing.budgets import budget_holds
        from billing.duties import controller_duties
        from billing.segments import record_moves
        from cluster.controller import add_duties
        from cluster.snapshot import add_hold
        from jobs.states import on_flush

        on_flush(record_moves)  # segments open and close with the jobs' own moves
        add_duties(controller_duties)  # budget thresholds, without cluster importing us
        add_hold(budget_holds)  # a spent budget with a hard stop holds the team's new jobs
