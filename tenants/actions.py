"""State changes for teams, memberships and API tokens; each writes one audit event."""

from __future__ import annotations

import math
from datetime import timedelta
from typing import TYPE_CHECKING

from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext as _

from audit.fields import fields_of
from audit.record import record
from tenants.models import ApiToken, Membership, Role, Team
from tenants.tokens import issue_token

if TYPE_CHECKING:
    from django.contrib.auth.models import User

TEAM_FIELDS = ("slug", "name", "parent_id", "fair_share_weight", "image_allowlist")
# Set by platform admins only: the weight moves every other team's place in the fair-share
# order, and the allow-list is the platform's rule on what a team may run.
ADMIN_FIELDS = ("fair_share_weight", "image_allowlist")
MAX_FAIR_SHARE_WEIGHT = 1000.0


def save_team(
    *,
    acting_user: User,
    slug: str,
    name: str,
    parent: Team | None = None,
    fair_share_weight: float = 1.0,
    image_allowlist: str = "",
    instance: Team | None = None,
) -> Team:
    """Create a team (platform admins) or change one."""
    with transaction.atomic():
        if parent is not None and parent.parent_id is not None:
            message = _("%(team)s is itself a sub-team; nest one level")
            raise ValidationError({"parent": message % {"team": parent.slug}})
        if instance is not None and parent is not None and parent.pk == instance.pk:
            raise ValidationError({"parent": _("a team cannot be its own department")})
        before = fields_of(instance, *TEAM_FIELDS)
        team = instance or Team()
        _check_admin_fields(
            acting_user, team, fair_share_weight=fair_share_weight, image_allowlist=image_allowlist
        )
        team.slug, team.name, team.parent = slug, name, parent
        team.fair_share_weight, team.image_allowlist = fair_share_weight, image_allowlist
        team.full_clean()
        team.save()
        record(
            "team.update" if instance else "team.create",
            actor=acting_user,
            team=team,
            target=team,
            before=before,
            after=fields_of(team, *TEAM_FIELDS),
        )
    return team


def _check_admin_fields(
    acting_user: User, team: Team, *, fair_share_weight: float, image_allowlist: str
) -> None:
    """Refuse a change of an admin's field by anyone else, and a weight out of its range."""
    values = {"fair_share_weight": fair_share_weight, "image_allowlist": image_allowlist}
    changed = [name for name in ADMIN_FIELDS if getattr(team, name) != values[name]]
    if changed and not acting_user.is_staff:
        raise PermissionDenied(
            _("%(field)s is set by platform admins only.") % {"field": changed[0]}
        )
    if "fair_share_weight" in changed:
        check_fair_share_weight(fair_share_weight)


def check_fair_share_weight(weight: float) -> None:
    """A weight scales the team's share against every other team's: finite, positive, bounded."""
    if not (math.isfinite(weight) and 0 < weight <= MAX_FAIR_SHARE_WEIGHT):
        raise ValidationError(
            {
                "fair_share_weight": _("must be a number above 0 and at most %(limit)g")
                % {"limit": MAX_FAIR_SHARE_WEIGHT}
            }
        )


def add_member(team: Team, user: User, *, role: str, acting_user: User) -> Membership:
    with transaction.atomic():
        if Membership.objects.for_team(team).filter(user=user).exists():
            message = _("%(user)s is already in %(team)s")
            figures = {"user": user.get_username(), "team": team.slug}
            raise ValidationError({"username": message % figures})
        _check_role(role)
        found = Membership.objects.create(team=team, user=user, role=role)
        record(
            "member.add",
            actor=acting_user,
            team=team,
            target=found,
            after={"user": user.get_username(), "role": role},
        )
    return found


def _check_role(role: str) -> None:
    """Refuse a role that is not one of `Role`'s values."""
    if role not in Role.values:
        message = _("must be one of %(roles)s")
        raise ValidationError({"role": message % {"roles": ", ".join(Role.values)}})


def _keep_a_lead(membership: Membership, field: str) -> None:
    """Refuse to take away the team's last lead: someone must be able to manage it."""
    if membership.role != Role.LEAD:
        return
    # Locked, so two leads demoting each other at once cannot both succeed.
    leads = Membership.objects.for_team(membership.team).filter(role=Role.LEAD)
    others = list(leads.select_for_update().values_list("pk", flat=True))
    if others == [membership.pk] or not others:
        message = _("%(user)s is the last lead of team %(team)s: make another member a lead first")
        figures = {"user": membership.user.get_username(), "team": membership.team.slug}
        raise ValidationError({field: message % figures})


def set_role(membership: Membership, role: str, *, acting_user: User) -> Membership:
    """Change a member's role; the team keeps at least one lead."""
    with transaction.atomic():
        _check_role(role)
        if role != Role.LEAD:
            _keep_a_lead(membership, "role")
        before = {"user": membership.user.get_username(), "role": membership.role}
        membership.role = role
        membership.save(update_fields=["role"])
        record(
            "member.role",
            actor=acting_user,
            team=membership.team,
            target=membership,
            before=before,
            after={"user": membership.user.get_username(), "role": role},
        )
    return membership


def remove_member(membership: Membership, *, acting_user: User) -> None:
    """Remove a member (their GPU cap in the team goes with them: quotas.apps); the team
    keeps at least one lead."""
    with transaction.atomic():
        _keep_a_lead(membership, "username")
        record(
            "member.remove",
            actor=acting_user,
            team=membership.team,
            target=membership,
            before={"user": membership.user.get_username(), "role": membership.role},
        )
        membership.delete()


def create_token(
    user: User, name: str, *, expires_in_days: int | None = None
) -> tuple[ApiToken, str]:
    """Issue a personal API token, optionally ending `expires_in_days` from now (so a leaked and
    forgotten token stops working); the raw value is returned once."""
    name = name.strip()
    if not name or len(name) > 100:
        raise ValidationError({"name": _("must be 1-100 characters")})
    expires_at = None
    if expires_in_days is not None:
        expires_at = timezone.now() + timedelta(days=expires_in_days)
    with transaction.atomic():
        token, raw = issue_token(user, name, expires_at=expires_at)
        record(
            "token.create",
            actor=user,
            team=None,
            target=token,
            after={
                "name": name,
                "prefix": token.prefix,
                "expires_at": expires_at.isoformat() if expires_at else None,
            },
        )
    return token, raw


def revoke_token(token: ApiToken, *, acting_user: User) -> None:
    with transaction.atomic():
        token.revoked_at = timezone.now()
        token.save(update_fields=["revoked_at"])
        record(
            "token.revoke",
            actor=acting_user,
            team=None,
            target=token,
            before={"name": token.name, "prefix": token.prefix},
        )


def record_login(user: User) -> None:
    with transaction.atomic():
        record("auth.login", actor=user, team=None, target=user)
