"""Probe endpoints: `/healthz` (the process answers) and `/readyz` (it can serve: the database
is reachable).

Both are unauthenticated and say nothing beyond "ok" or "not ready": which check failed goes to
the log, never to the caller. Their bodies are for probes, not people, so they are not
translated.

The cache and the channel layer carry on without Redis (base.outage): pages and the API still
answer, only live figures wait. Taking every web pod out of its Service for a Redis outage would
turn that into a full one, so their state is logged at each probe but does not decide readiness.
Their calls do not fail while Redis is away, so the probe reads the adapters' outage state after
a call instead.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

from channels.layers import get_channel_layer
from django.contrib.contenttypes.models import ContentType
from django.core.cache import cache
from django.http import HttpRequest, HttpResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_safe

log = logging.getLogger(__name__)

PROBE_KEY = "health:probe"
PROBE_GROUP, PROBE_CHANNEL = "health.probe", "health.probe!none"


def _plain(body: str, status: int = 200) -> HttpResponse:
    return HttpResponse(body, status=status, content_type="text/plain; charset=utf-8")


def _reached(adapter: object) -> bool:
    """False while the adapter takes Redis for away (adapters without Redis have no outage)."""
    outage = getattr(adapter, "outage", None)
    return outage is None or not outage.away


async def _database() -> bool:
    await ContentType.objects.aexists()  # any query: the pool's connection may be stale
    return True


async def _cache() -> bool:
    await cache.aset(PROBE_KEY, "1", timeout=30)
    return _reached(cache)


async def _channel_layer() -> bool:
    layer = get_channel_layer()
    if layer is None:
        return True  # no layer configured: nothing to reach
    # Leaving a group nobody joined changes nothing, but goes to Redis like any call.
    await layer.group_discard(PROBE_GROUP, PROBE_CHANNEL)
    return _reached(layer)


REQUIRED: dict[str, Callable[[], Awaitable[bool]]] = {"database": _database}
DEGRADED: dict[str, Callable[[], Awaitable[bool]]] = {
    "cache": _cache,
    "channel layer": _channel_layer,
}


async def _passes(name: str, check: Callable[[], Awaitable[bool]]) -> bool:
    try:
        passed = await check()
    except Exception as exc:  # whatever went wrong, the probe's answer is "not ready"
        log.warning("readiness: %s: %s: %s", name, type(exc).__name__, exc)
        return False
    if not passed:
        log.warning("readiness: %s unreachable", name)
    return passed


@never_cache
@require_safe
def healthz(request: HttpRequest) -> HttpResponse:
    """The process is alive and answers HTTP; nothing else is checked."""
    return _plain("ok")


@never_cache
@require_safe
async def readyz(request: HttpRequest) -> HttpResponse:
    """200 when the database answers, else 503; a cache or channel layer away is logged."""
    for name, check in DEGRADED.items():
        await _passes(name, check)
    failing = [name for name, check in REQUIRED.items() if not await _passes(name, check)]
    if failing:
        return _plain("not ready", status=503)
    return _plain("ok")
