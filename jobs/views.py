"""Pages: dashboard, job list, submit form, job detail, cancel and clone."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils.translation import gettext as _
from django.views.decorators.http import require_POST

from base.auth import signed_in
from jobs.access import access_job, can_change_job
from jobs.actions import cancel_job, clone_job, submit_job
from jobs.forms import JobForm
from jobs.models import ACTIVE_STATES, SPEC_BODIES, Job, State
from jobs.reasons import pending_reason
from jobs.spec import SpecError, masked_env, parse_spec
from jobs.usage import usage_against_quota
from quotas.models import GpuType
from tenants.access import access_team
from tenants.models import Membership, Team


def _my_teams(user: Any) -> list[Team]:
    return [m.team for m in Membership.unscoped.filter(user=user).select_related("team")]


def _with_reasons(jobs: Iterable[Job]) -> list[tuple[Job, str]]:
    """Each job with why it waits, in the page's language."""
    return [(job, pending_reason(job)) for job in jobs]


@login_required
def dashboard(request: HttpRequest) -> HttpResponse:
    teams = _my_teams(request.user)
    active = (
        Job.objects.for_user(request.user)
        .filter(owner=signed_in(request), state__in=ACTIVE_STATES)
        .select_related("team", "owner", "queue", "gpu_type")
        .defer(*SPEC_BODIES)[:20]
    )
    return render(
        request,
        "jobs/dashboard.html",
        {"rows": _with_reasons(active), "usage": usage_against_quota(teams), "teams": teams},
    )


@login_required
def job_list(request: HttpRequest) -> HttpResponse:
    jobs = (
        Job.objects.for_user(request.user)
        .select_related("team", "owner", "queue", "gpu_type")
        .defer(*SPEC_BODIES)
    )
    state = request.GET.get("state", "")
    if state in State.values:
        jobs = jobs.filter(state=state)
    if team := request.GET.get("team"):
        jobs = jobs.filter(team__slug=team)
    if request.GET.get("mine"):
        jobs = jobs.filter(owner=signed_in(request))
    page = Paginator(jobs, 50).get_page(request.GET.get("page"))
    query = request.GET.copy()
    query.pop("page", None)
    context = {
        "page": page,
        "rows": _with_reasons(page.object_list),
        "states": State.values,
        "state": state,
        "query": query.urlencode(),
    }
    return render(request, "jobs/list.html", context)


def _form(request: HttpRequest, data: Any = None, initial: Any = None) -> JobForm:
    teams = [t.slug for t in _my_teams(request.user)]
    gpu_types = list(GpuType.objects.values_list("name", flat=True))
    return JobForm(data, initial=initial, teams=teams, gpu_types=gpu_types)


@login_required
def job_new(request: HttpRequest) -> HttpResponse:
    if request.method != "POST":
        return render(request, "jobs/new.html", {"form": _form(request)})
    form = _form(request, request.POST)
    if form.is_valid():
        try:
            spec = parse_spec(form.spec_data())
            team = access_team(request.user, spec.team or form.cleaned_data["team"])
            job = submit_job(team, spec, acting_user=signed_in(request))
        except SpecError as exc:
            for field, message in exc.errors.items():
                form.add_error(
                    None, _("%(field)s: %(message)s") % {"field": field, "message": message}
                )
        else:
            messages.success(
                request, _("Job %(name)s submitted (#%(id)s).") % {"name": job.name, "id": job.pk}
            )
            return redirect("job-detail", job_id=job.pk)
    return render(request, "jobs/new.html", {"form": form}, status=400)


@login_required
def job_detail(request: HttpRequest, job_id: int) -> HttpResponse:
    job = access_job(request.user, job_id)
    context = {
        "job": job,
        "reason": pending_reason(job),
        "env": masked_env(job.env),
        "events": job.events.all(),
        "can_change": can_change_job(request.user, job),
    }
    return render(request, "jobs/detail.html", context)


@login_required
@require_POST
def job_cancel(request: HttpRequest, job_id: int) -> HttpResponse:
    job = access_job(request.user, job_id, write=True)
    try:
        cancel_job(job, acting_user=signed_in(request))
        messages.success(request, _("Job %(name)s cancelled.") % {"name": job.name})
    except ValidationError as exc:
        messages.error(request, "; ".join(exc.messages))
    return redirect("job-detail", job_id=job.pk)


@login_required
@require_POST
def job_clone(request: HttpRequest, job_id: int) -> HttpResponse:
    job = access_job(request.user, job_id, write=True)
    try:
        clone = clone_job(job, acting_user=signed_in(request))
    except SpecError as exc:
        messages.error(request, str(exc))
        return redirect("job-detail", job_id=job.pk)
    messages.success(request, _("Cloned as #%(id)s.") % {"id": clone.pk})
    return redirect("job-detail", job_id=clone.pk)
