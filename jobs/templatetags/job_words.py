"""`{% load job_words %}`: the words for a job's codes where a page has the code, not the job
(a sweep's count of members per state, a job's wait reason)."""

from __future__ import annotations

from django import template

from jobs.models import State
from jobs.reasons import reason_label as _reason_label

register = template.Library()


@register.filter
def state_label(code: str) -> str:
    """`QUEUED` -> "Queued", in the active language; an unknown code as it is."""
    return str(State(code).label) if code in State.values else code


@register.filter
def reason_label(code: str) -> str:
    """`PRIORITY` -> "Jobs ahead", in the active language; an unknown code as it is."""
    return _reason_label(code)
