from typing import Any

from django.apps import AppConfig
from django.db.models.signals import post_delete


class QuotasConfig(AppConfig):
    name = "quotas"
    verbose_name = "Quotas and queues"

    def ready(self) -> None:
        from tenants.models import Membership

        # A cap is a member's: whichever way a membership goes (removed, its team or user
        # deleted), its cap goes with it. tenants, below quotas, does not know of caps.
        post_delete.connect(_drop_cap, sender=Membership, dispatch_uid="quotas.drop_cap")


def _drop_cap(sender: type[Any], instance: Any, **kwargs: Any) -> None:
    from quotas.models import MemberCap

    MemberCap.unscoped.filter(team_id=instance.team_id, user_id=instance.user_id).delete()
