"""Template context: the teams the signed-in user belongs to, for the navigation bar."""

from django.http import HttpRequest

from tenants.models import Membership


def memberships(request: HttpRequest) -> dict[str, object]:
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return {"my_memberships": []}
    return {"my_memberships": Membership.unscoped.filter(user=user).select_related("team")}
