"""A usage query from request parameters (API and page alike); errors name the parameter."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from typing import Any

from django.utils.translation import gettext as _

from base.errors import FieldErrors
from billing.usage import GROUP_NAMES, Period, current_month, month_period

MAX_DAYS = 366


@dataclass(frozen=True)
class UsageQuery:
    period: Period
    group_by: tuple[str, ...]
    team: str | None


def _day(name: str, raw: str) -> date:
    try:
        return datetime.strptime(raw, "%Y-%m-%d").date()
    except ValueError:
        raise FieldErrors({name: _("must be a date, YYYY-MM-DD")}) from None


def parse_period(params: Mapping[str, Any]) -> Period:
    """`period=YYYY-MM`, or `from` and `to` (days, both included); the current month if none."""
    if "from" in params or "to" in params:
        if "period" in params:
            raise FieldErrors({"period": _("give either period or from and to, not both")})
        missing = [name for name in ("from", "to") if not params.get(name)]
        if missing:
            raise FieldErrors({missing[0]: _("is required with the other end of the period")})
        start, last = _day("from", params["from"]), _day("to", params["to"])
        if last < start:
            raise FieldErrors({"to": _("must not be before from")})
        if (last - start).days + 1 > MAX_DAYS:
            raise FieldErrors({"to": _("at most %(days)s days after from") % {"days": MAX_DAYS}})
        return Period(start, last + timedelta(days=1))
    return parse_month(params)


def parse_month(params: Mapping[str, Any]) -> Period:
    """`period=YYYY-MM`; the current month if none."""
    if not params.get("period"):
        return current_month()
    try:
        return month_period(str(params["period"]))
    except ValueError:
        raise FieldErrors({"period": _("must be a month, YYYY-MM")}) from None


def parse_group_by(raw: str | None, default: str = "team") -> tuple[str, ...]:
    names = [name.strip() for name in (raw or default).split(",") if name.strip()]
    unknown = [name for name in names if name not in GROUP_NAMES]
    if unknown or not names:
        choices = ", ".join(GROUP_NAMES)
        raise FieldErrors({"group_by": _("must be some of %(choices)s") % {"choices": choices}})
    if len(set(names)) != len(names):
        raise FieldErrors({"group_by": _("names a group twice")})
    return tuple(names)


def parse_usage_query(params: Mapping[str, Any], default_group: str = "team") -> UsageQuery:
    return UsageQuery(
        parse_period(params),
        parse_group_by(params.get("group_by"), default_group),
        params.get("team") or None,
    )
