"""`client_ip(request)`: the address a request came from, trusting proxies only as configured.

DRF's throttles read it the same way (its NUM_PROXIES is TRUSTED_PROXY_COUNT), so the API's
limits, the login lockout and the audit trail agree on who asked. X-Forwarded-For is read only
when TRUSTED_PROXY_COUNT proxies are declared: without them any client could name any address.
"""

from django.core.exceptions import ValidationError
from django.core.validators import validate_ipv46_address
from django.http import HttpRequest
from rest_framework.throttling import BaseThrottle


def client_ip(request: HttpRequest) -> str | None:
    remote = request.META.get("REMOTE_ADDR")
    given = BaseThrottle().get_ident(request)  # type: ignore[arg-type]
    try:
        validate_ipv46_address(given)
    except ValidationError:
        return remote  # a proxy that wrote garbage is not believed
    return given
