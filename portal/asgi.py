"""ASGI entry point: HTTP through Django (but agents' posts), websockets through Channels with
session auth or a personal API token (tenants/ws_auth.py)."""

import gc
import os
from typing import Any

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")
django_asgi_app = get_asgi_application()

from channels.auth import AuthMiddlewareStack  # noqa: E402  (needs the apps loaded)
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from channels.security.websocket import AllowedHostsOriginValidator  # noqa: E402

from monitoring import endpoint  # noqa: E402
from portal.routing import websocket_urlpatterns  # noqa: E402
from tenants.ws_auth import TokenWebsocketAuth  # noqa: E402


async def http(scope: Any, receive: Any, send: Any) -> None:
    """Agents' posts go straight to their endpoint (monitoring/endpoint.py), the rest to Django."""
    if scope["path"] == endpoint.PATH:
        await endpoint.agent_samples(scope, receive, send)
    else:
        await django_asgi_app(scope, receive, send)


application = ProtocolTypeRouter(
    {
        "http": http,
        "websocket": AllowedHostsOriginValidator(
            AuthMiddlewareStack(TokenWebsocketAuth(URLRouter(websocket_urlpatterns)))
        ),
    }
)

# The cyclic collector paused a web process serving 1,000 websockets for up to 0.3 s per full
# collection, several times a minute. What is loaded by now (Django, the apps, their modules)
# lives as long as the process: frozen, no collection scans it again. And a young collection
# every 10,000 net allocations rather than 700 makes full ones rarer by as much.
gc.freeze()
gc.set_threshold(10_000, 10, 10)
