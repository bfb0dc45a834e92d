"""The roles a member holds in a team: the vocabulary tenants stores and every app reads."""

from django.db import models
from django.utils.translation import gettext_lazy as _


class Role(models.TextChoices):
    MEMBER = "member", _("Member")
    LEAD = "lead", _("Lead")
