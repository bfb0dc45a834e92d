"""The admin's scheduling policy page: which policy runs, and a switch that takes effect at the
controller's next cycle (`cluster.policy`)."""

from __future__ import annotations

from django.conf import settings
from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils.translation import gettext as _

from base.auth import admin_required, signed_in
from base.errors import FieldErrors
from base.forms import flash_errors
from cluster.policy import DESCRIPTIONS, chosen, set_policy
from scheduler import Policy


@admin_required
def scheduling_policy(request: HttpRequest) -> HttpResponse:
    if request.method == "POST":
        try:
            changed = set_policy(request.POST.get("policy", ""), acting_user=signed_in(request))
        except FieldErrors as exc:
            flash_errors(request, exc)
        else:
            text = _("The scheduler runs %(policy)s from its next cycle.")
            messages.success(request, text % {"policy": changed.policy})
            return redirect("manage-scheduling")
    row = chosen()
    current = row.policy if row else settings.SCHEDULER_POLICY
    choices = [(p.value, DESCRIPTIONS[p]) for p in Policy]
    context = {"row": row, "current": current, "choices": choices}
    return render(request, "cluster/policy.html", context)
