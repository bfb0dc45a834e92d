"""The Django project: settings, URLs, ASGI routing, the Celery app and the roles runner."""

from portal.celery import app as celery_app

__all__ = ["celery_app"]
