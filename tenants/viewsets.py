"""The tenant-scoped base viewset every tenant-owned API endpoint derives from."""

from __future__ import annotations

from typing import Any, ClassVar

from django.db import models
from rest_framework import viewsets

from tenants.access import access_team


class TenantViewSet(viewsets.GenericViewSet):
    """The one place a tenant-owned API queryset comes from.

    Subclasses name the model and what to join; they may not supply their own queryset, so no
    endpoint can forget the scope. Nested routes (`teams/{team_slug}/...`) narrow it to that team,
    answering 404 for a team the user cannot see.
    """

    model: ClassVar[type[models.Model]]
    related: ClassVar[tuple[str, ...]] = ()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        for forbidden in ("get_queryset", "queryset", "get_object"):
            if forbidden in cls.__dict__:
                raise TypeError(
                    f"{cls.__name__} must not define {forbidden}: TenantViewSet scopes it"
                )

    def get_queryset(self) -> models.QuerySet[Any]:
        queryset = self.model.objects.for_user(self.request.user)  # type: ignore[attr-defined]
        slug = self.kwargs.get("team_slug")
        if slug is not None:
            queryset = queryset.filter(team=access_team(self.request.user, slug))
        return queryset.select_related(*self.related)
