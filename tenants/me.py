"""What `/api/v1/me/` answers: who the caller is and their teams, in one statement.

Clients read it beside every few calls (the benchmark's clients after each submission). Through
`MeSerializer` (a ModelSerializer builds its fields on every use) and a membership query
compiled each time it cost about 1.1 ms of the web process's CPU; this, about 0.1 ms
(docs/performance.md, "Serving"). `MeSerializer` stays the answer's schema, and
`tests/tenants/test_me.py` holds the two equal.
"""

from __future__ import annotations

from functools import cache
from typing import TYPE_CHECKING, Any

from django.db import connection

from base.rows import column, table
from tenants.models import Membership, Team

if TYPE_CHECKING:
    from django.contrib.auth.models import User


@cache
def _teams() -> str:
    slug = column(Team, "slug", "team")
    return f"""
SELECT {slug}, {column(Team, "name", "team")}, {column(Membership, "role", "member")}
FROM {table(Membership)} member
JOIN {table(Team)} team ON {column(Team, "pk", "team")} = {column(Membership, "team", "member")}
WHERE {column(Membership, "user", "member")} = %s
ORDER BY {slug}
"""


def me(user: User) -> dict[str, Any]:
    """`user` as MeSerializer shows them: name, email, whether an admin, teams and roles."""
    with connection.cursor() as cursor:
        cursor.execute(_teams(), [user.pk])
        teams = [{"slug": slug, "name": name, "role": role} for slug, name, role in cursor]
    return {
        "username": user.username,
        "email": user.email,
        "is_admin": user.is_staff,
        "teams": teams,
    }
