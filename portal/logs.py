"""Logs as JSON lines (structlog), and Sentry when a DSN is given.

Every record, whether written through `logging` (Django, the libraries, our modules) or through
`structlog.get_logger()`, goes through one chain: time, level, logger, then the current request's
id, user and team (base.middleware.log_fields), rendered as one JSON object per line
(`LOG_FORMAT=json`, production's default) or as readable text (`plain`, the demo's).
"""

from __future__ import annotations

import logging
from typing import Any

import sentry_sdk
import structlog
from structlog.typing import Processor

CHAIN: list[Processor] = [
    structlog.contextvars.merge_contextvars,
    structlog.stdlib.add_log_level,
    structlog.stdlib.add_logger_name,
    structlog.processors.TimeStamper(fmt="iso", utc=True),
]


def formatter(log_format: str) -> logging.Formatter:
    """The handlers' formatter (LOGGING's "()"): renders stdlib and structlog records alike."""
    # Imported when logging is configured, not with the settings that name this module.
    from base.middleware import log_fields

    structlog.configure(
        processors=[*CHAIN, log_fields, structlog.stdlib.ProcessorFormatter.wrap_for_formatter],
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.stdlib.BoundLogger,
        cache_logger_on_first_use=True,
    )
    renderer: Processor
    if log_format == "json":
        renderer = structlog.processors.JSONRenderer()
        tail: list[Processor] = [structlog.processors.format_exc_info]
    else:
        renderer = structlog.dev.ConsoleRenderer(
            colors=False, exception_formatter=structlog.dev.plain_traceback
        )
        tail = []
    return structlog.stdlib.ProcessorFormatter(
        # A stdlib record's extra fields first: Django's name the request.
        foreign_pre_chain=[*CHAIN, structlog.stdlib.ExtraAdder(), log_fields],
        processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta, *tail, renderer],
    )


def tag_request_id(event: Any, hint: Any) -> Any:
    """Sentry's before_send: the request id, to find the event's log lines."""
    from base.middleware import current_request_context

    context = current_request_context()
    if context is not None:
        event.setdefault("tags", {})["request_id"] = context.request_id
    return event


def init_sentry(dsn: str, *, environment: str, release: str, **options: Any) -> None:
    """Report errors to Sentry (its Django, Celery and logging integrations turn on by
    themselves), without personal data."""
    sentry_sdk.init(
        dsn=dsn,
        environment=environment,
        release=release or None,
        send_default_pii=False,
        before_send=tag_request_id,
        **options,
    )
