"""The one scoping mechanism for tenant-owned data.

Every tenant-owned model inherits `TenantOwned`: a non-null `team` and a default manager that
refuses to query until it is told whose data it serves. `Job.objects.all()` raises `ScopeError`;
`Job.objects.for_user(user)` returns what that user may see; `Job.objects.for_team(team)` serves
code that already holds an authorised team. `Job.unscoped` exists for the controller, migrations
and the Django admin, and is easy to find in review.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Generic, TypeVar

from django.db import models
from django.db.models import Q

if TYPE_CHECKING:
    from django.contrib.auth.models import AnonymousUser, User

    from tenants.models import Team

    AnyUser = User | AnonymousUser


class ScopeError(RuntimeError):
    """Raised when tenant-owned data is queried without saying for whom."""


def visible_team_ids(user: AnyUser) -> models.QuerySet[Any]:
    """Ids of the teams a user may see: their own, and the sub-teams of teams they lead."""
    from tenants.models import Role, Team

    if not user.is_authenticated:
        return Team.objects.none().values("id")
    if user.is_staff:
        return Team.objects.values("id")
    return Team.objects.filter(
        Q(memberships__user=user)
        | Q(parent__memberships__user=user, parent__memberships__role=Role.LEAD)
    ).values("id")


M = TypeVar("M", bound=models.Model)


class TenantQuerySet(models.QuerySet[M], Generic[M]):
    def for_user(self, user: AnyUser) -> TenantQuerySet[M]:
        return self.filter(team_id__in=visible_team_ids(user))

    def for_team(self, team: Team) -> TenantQuerySet[M]:
        return self.filter(team=team)


class TenantManager(models.Manager[M], Generic[M]):
    """Fails closed: there is no unscoped queryset behind this manager."""

    def get_queryset(self) -> TenantQuerySet[M]:
        raise ScopeError(
            f"{self.model.__name__}.objects needs a scope: use .for_user(user) or "
            f".for_team(team) (or {self.model.__name__}.unscoped where no tenant applies)"
        )

    def _base(self) -> TenantQuerySet[M]:
        return TenantQuerySet(self.model, using=self._db)

    def for_user(self, user: AnyUser) -> TenantQuerySet[M]:
        return self._base().for_user(user)

    def for_team(self, team: Team) -> TenantQuerySet[M]:
        return self._base().for_team(team)

    def create(self, **kwargs: Any) -> M:
        """Creating is scoped by the row itself: it must name its team."""
        if kwargs.get("team") is None and kwargs.get("team_id") is None:
            raise ScopeError(f"{self.model.__name__} needs a team")
        return self._base().create(**kwargs)


class TenantOwned(models.Model):
    """Base of every tenant-owned model."""

    team = models.ForeignKey("tenants.Team", on_delete=models.CASCADE, related_name="%(class)ss")

    # Declared first, so Django's internals (related managers, uniqueness checks, the admin,
    # cascades) use it; application code goes through `objects`, which needs a scope.
    unscoped = models.Manager()
    objects = TenantManager()

    class Meta:
        abstract = True
