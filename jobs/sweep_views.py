"""The sweep page: members' states at a glance, cancel the rest, clone. `urls` is what
portal/pages.py includes."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils.translation import gettext as _
from django.views.decorators.http import require_POST

from base.auth import signed_in
from base.errors import FieldErrors
from base.forms import flash_errors
from jobs.models import ACTIVE_STATES
from jobs.sweeps import (
    access_sweep,
    can_change_sweep,
    cancel_sweep,
    clone_sweep,
    member_states,
)
from jobs.sweeps_api import members


@login_required
def sweep_detail(request: HttpRequest, sweep_id: int) -> HttpResponse:
    sweep = access_sweep(request.user, sweep_id)
    states = member_states(sweep)
    context = {
        "sweep": sweep,
        "states": states,
        "members": members(sweep),
        "active": sum(n for state, n in states.items() if state in ACTIVE_STATES),
        "can_change": can_change_sweep(request.user, sweep),
    }
    return render(request, "jobs/sweep.html", context)


@login_required
@require_POST
def sweep_cancel(request: HttpRequest, sweep_id: int) -> HttpResponse:
    sweep = access_sweep(request.user, sweep_id, write=True)
    cancelled = cancel_sweep(sweep, acting_user=signed_in(request))
    messages.success(request, _("%(n)d jobs of the sweep cancelled.") % {"n": cancelled})
    return redirect("sweep-detail", sweep_id=sweep.pk)


@login_required
@require_POST
def sweep_clone(request: HttpRequest, sweep_id: int) -> HttpResponse:
    sweep = access_sweep(request.user, sweep_id, write=True)
    try:
        copy = clone_sweep(sweep, acting_user=signed_in(request))
    except FieldErrors as exc:
        flash_errors(request, exc)
        return redirect("sweep-detail", sweep_id=sweep.pk)
    messages.success(request, _("Cloned as sweep #%(id)s.") % {"id": copy.pk})
    return redirect("sweep-detail", sweep_id=copy.pk)
