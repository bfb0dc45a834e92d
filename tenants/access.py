"""Access helpers: return the object or raise the same 404 whether it is missing or foreign.

Existence of another team's objects is a secret, so outsiders get 404. A teammate who may see an
object but not change it gets 403: its existence is no secret to them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from django.core.exceptions import PermissionDenied
from django.http import Http404
from django.utils.translation import gettext as _

from tenants.models import Membership, Role, Team
from tenants.scoping import visible_team_ids

if TYPE_CHECKING:
    from tenants.scoping import AnyUser


def membership(user: AnyUser, team: Team) -> Membership | None:
    if not user.is_authenticated:
        return None
    return Membership.objects.for_team(team).filter(user=user).first()


def is_lead(user: AnyUser, team: Team) -> bool:
    found = membership(user, team)
    return found is not None and found.role == Role.LEAD


def can_manage_team(user: AnyUser, team: Team) -> bool:
    """Staff, the team's leads, and the leads of its department manage a team."""
    if not user.is_authenticated:
        return False
    if user.is_staff:
        return True
    return Membership.unscoped.filter(
        user=user, role=Role.LEAD, team_id__in=[t for t in (team.pk, team.parent_id) if t]
    ).exists()


def access_team(user: AnyUser, slug: str, *, manage: bool = False) -> Team:
    team = Team.objects.filter(slug=slug, id__in=visible_team_ids(user)).first()
    if team is None:
        raise Http404(_("No such team."))
    if manage and not can_manage_team(user, team):
        raise PermissionDenied(_("Only the team's leads and platform admins can change this team."))
    return team
