from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class BillingConfig(AppConfig):
    name = "billing"
    verbose_name = _("Usage and billing")

    def ready(self) -> None:
        from billing.segments import record_moves
        from jobs.states import on_flush

        on_flush(record_moves)  # segments open and close with the jobs' own moves
