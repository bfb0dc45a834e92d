"""Team (the tenant), Membership (member or lead) and personal API tokens."""

from __future__ import annotations

from django.conf import settings
from django.core.validators import RegexValidator
from django.db import models
from django.utils.translation import gettext_lazy as _

from base.roles import Role
from tenants.images import image_allowed
from tenants.scoping import TenantOwned

SLUG_VALIDATOR = RegexValidator(
    r"^[a-z0-9]([a-z0-9-]{0,30}[a-z0-9])?$",
    _("must be 1-32 lowercase letters, digits or '-', starting and ending with a letter or digit"),
)


class Team(models.Model):
    """A tenant. A team with a parent belongs to that department (a cohort sharing idle quota)."""

    slug = models.CharField(max_length=32, unique=True, validators=[SLUG_VALIDATOR])
    name = models.CharField(max_length=100)
    parent = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.PROTECT, related_name="children"
    )
    fair_share_weight = models.FloatField(default=1.0)
    image_allowlist = models.TextField(
        blank=True,
        help_text=_("Image prefixes allowed for this team's jobs, one per line; empty allows any."),
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["slug"]

    def __str__(self) -> str:
        return self.slug

    @property
    def namespace(self) -> str:
        return self.namespace_for(self.slug)

    @staticmethod
    def namespace_for(slug: str) -> str:
        """The Kubernetes namespace of the team with this slug."""
        return f"{settings.NAMESPACE_PREFIX}-{slug}"

    def allowed_image_prefixes(self) -> list[str]:
        return [line.strip() for line in self.image_allowlist.splitlines() if line.strip()]

    def image_allowed(self, image: str) -> bool:
        """Whether the team's jobs may run this image: any, if the allow-list is empty."""
        allowed = self.allowed_image_prefixes()
        return not allowed or image_allowed(image, allowed)


class Membership(TenantOwned):
    """A user's place in a team. Leads manage the team; platform admins are Django staff."""

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships"
    )
    role = models.CharField(max_length=10, choices=Role.choices, default=Role.MEMBER)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["user", "team"], name="one_membership_per_team")
        ]
        ordering = ["team__slug", "user__username"]

    def __str__(self) -> str:
        return f"{self.user} in {self.team} ({self.role})"

    @property
    def is_lead(self) -> bool:
        return self.role == Role.LEAD


class ApiToken(models.Model):
    """A personal API token. Only its SHA-256 is stored; the token is shown once at creation."""

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens"
    )
    name = models.CharField(max_length=100)
    prefix = models.CharField(max_length=16, unique=True)
    key_hash = models.CharField(max_length=64, unique=True)
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)
    # Optional: a token with an end stops working by itself if it leaks and is forgotten.
    expires_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.name} ({self.prefix}…)"

    @property
    def active(self) -> bool:
        return self.revoked_at is None


class UserPreference(models.Model):
    """What a person chose for themselves, kept across sessions and browsers: the language."""

    user = models.OneToOneField(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="preference"
    )
    language = models.CharField(max_length=10, choices=settings.LANGUAGES, blank=True)

    def __str__(self) -> str:
        return f"{self.user}: {self.language or '-'}"


class ClaimMapping(TenantOwned):
    """Who signs in through the organisation's identity provider with `value` in the team
    claim (OIDC_TEAM_CLAIM, e.g. a group) is a member of `team` with `role`."""

    value = models.CharField(max_length=200)
    role = models.CharField(max_length=10, choices=Role.choices, default=Role.MEMBER)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["value", "team"], name="one_mapping_per_claim_value")
        ]
        ordering = ["value", "team__slug"]

    def __str__(self) -> str:
        return f"{self.value} → {self.team} ({self.role})"


class OidcIdentity(models.Model):
    """The account at the organisation's identity provider (its `sub`) a user signs in with."""

    user = models.OneToOneField(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="oidc_identity"
    )
    subject = models.CharField(max_length=255, unique=True)

    def __str__(self) -> str:
        return f"{self.user}: {self.subject}"
