"""WSGI entry point: pages and the REST API under gunicorn (the `web` role).

A synchronous view holds a thread for its whole request, so the web role runs a few processes of
several threads each (deploy/image/entrypoint.sh), where ASGI would run every synchronous view of
a process on its one thread. Websockets and the agents' endpoint stay with the ASGI application
(portal.asgi, the `ws` role); the proxy sends `/ws/` and `/api/v1/agent/` there.
"""

import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")
application = get_wsgi_application()
