"""Pages: the dashboard's own jobs, job list, submit form, job detail, cancel and clone."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.core.paginator import Paginator
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse, QueryDict
from django.shortcuts import redirect, render
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy as _lazy
from django.utils.translation import ngettext
from django.views.decorators.http import require_POST

from base.auth import signed_in
from jobs.access import access_job, can_change_job
from jobs.actions import cancel_job, clone_job, submit_data
from jobs.forms import JobFilterForm, JobForm, clone_initial, unmask_env
from jobs.models import ACTIVE_STATES, SPEC_BODIES, Job
from jobs.reasons import pending_reason
from jobs.spec import SpecError, masked_env
from jobs.usage import usage_against_quota
from quotas.models import GpuType
from tenants.access import access_team
from tenants.models import Membership, Team

MAX_BULK = 200
"""Jobs cancelled by one bulk action at most."""


def _my_teams(user: Any) -> list[Team]:
    return [m.team for m in Membership.unscoped.filter(user=user).select_related("team")]


def _with_reasons(jobs: Iterable[Job]) -> list[tuple[Job, str]]:
    """Each job with why it waits, in the page's language."""
    return [(job, pending_reason(job)) for job in jobs]


def my_dashboard(request: HttpRequest) -> dict[str, Any]:
    """The signed-in user's part of the dashboard (portal/dashboard.py): their active jobs and
    their teams' GPUs against quota."""
    teams = _my_teams(request.user)
    active = (
        Job.objects.for_user(request.user)
        .filter(owner=signed_in(request), state__in=ACTIVE_STATES)
        .select_related("team", "owner", "queue", "gpu_type")
        .defer(*SPEC_BODIES)[:20]
    )
    return {"rows": _with_reasons(active), "usage": usage_against_quota(teams), "teams": teams}


COLUMNS = (
    ("id", "#"),
    ("name", _lazy("Name")),
    ("team", _lazy("Team")),
    ("owner", _lazy("Owner")),
    ("gpus", _lazy("GPUs")),
    ("state", _lazy("State")),
    (None, _lazy("Why / when")),
    ("submitted", _lazy("Submitted")),
)


def _sort_links(query: QueryDict, current: str) -> list[dict[str, Any]]:
    """Each column's heading, with the query that sorts by it (the other way if it sorts the
    list already) and the filters kept."""
    links = []
    for key, label in COLUMNS:
        if key is None:
            links.append({"label": label, "order": "none"})
            continue
        params = query.copy()
        params.pop("page", None)
        params["sort"] = f"-{key}" if current == key else key
        order = {key: "ascending", f"-{key}": "descending"}.get(current, "none")
        links.append({"label": label, "query": params.urlencode(), "order": order})
    return links


@login_required
def job_list(request: HttpRequest) -> HttpResponse:
    jobs: QuerySet[Job] = (
        Job.objects.for_user(request.user)
        .select_related("team", "owner", "queue", "gpu_type")
        .defer(*SPEC_BODIES)
    )
    teams = [t.slug for t in _my_teams(request.user)]
    gpu_types = list(GpuType.objects.values_list("name", flat=True))
    filters = JobFilterForm(request.GET, teams=teams, gpu_types=gpu_types)
    valid = filters.is_valid()
    if valid:
        jobs = filters.filter(jobs, signed_in(request))
    page = Paginator(jobs, 50).get_page(request.GET.get("page"))
    query = request.GET.copy()
    query.pop("page", None)
    context = {
        "page": page,
        "rows": _with_reasons(page.object_list),
        "filters": filters,
        "columns": _sort_links(request.GET, request.GET.get("sort") or "-submitted"),
        "query": query.urlencode(),
    }
    return render(request, "jobs/list.html", context, status=200 if valid else 400)


def _changeable(request: HttpRequest, ids: list[str]) -> list[Job]:
    """The selected jobs the user may cancel (others', foreign and unknown ids left out)."""
    numbers = [int(i) for i in ids if i.isdigit()][:MAX_BULK]
    jobs = (
        Job.objects.for_user(request.user)
        .filter(pk__in=numbers, state__in=ACTIVE_STATES)
        .select_related("team", "owner", "queue", "gpu_type")
        .defer(*SPEC_BODIES)
    )
    return [job for job in jobs if can_change_job(request.user, job)]


@login_required
def job_cancel_many(request: HttpRequest) -> HttpResponse:
    """GET: the confirmation of cancelling the selected jobs; POST: cancel them."""
    source = request.POST if request.method == "POST" else request.GET
    jobs = _changeable(request, source.getlist("job"))
    if request.method != "POST":
        return render(request, "jobs/cancel_many.html", {"jobs": jobs})
    cancelled = 0
    for job in jobs:
        try:
            cancel_job(job, acting_user=signed_in(request))
            cancelled += 1
        except ValidationError:
            continue  # ended meanwhile: nothing to cancel
    message = ngettext("%(count)d job cancelled.", "%(count)d jobs cancelled.", cancelled)
    messages.success(request, message % {"count": cancelled})
    return redirect("job-list")


def _form(request: HttpRequest, data: Any = None, initial: Any = None) -> JobForm:
    teams = [t.slug for t in _my_teams(request.user)]
    gpu_types = list(GpuType.objects.values_list("name", flat=True))
    return JobForm(data, initial=initial, teams=teams, gpu_types=gpu_types)


@login_required
def job_new(request: HttpRequest) -> HttpResponse:
    if request.method != "POST":
        return render(
            request, "jobs/new.html", {"form": _form(request, initial=_clone_initial(request))}
        )
    form = _form(request, request.POST)
    form.is_valid()  # fills cleaned_data with the fields that are fine, errors with the rest
    data, problems = form.spec_data()
    team_slug = (data or {}).get("team") or form.cleaned_data.get("team")
    if data is not None and isinstance(team_slug, str) and "team" not in problems:
        try:
            team = access_team(request.user, team_slug)
            source = _clone_source(request, form, data)
            job = submit_data(
                team, data, acting_user=signed_in(request), faulty=problems, cloned_from=source
            )
        except SpecError as exc:
            problems = {**exc.errors, **problems}
        else:
            messages.success(
                request, _("Job %(name)s submitted (#%(id)s).") % {"name": job.name, "id": job.pk}
            )
            return redirect("job-detail", job_id=job.pk)
    form.place_errors(problems)
    return render(request, "jobs/new.html", {"form": form}, status=400)


def _clone_source(request: HttpRequest, form: JobForm, data: dict[str, Any]) -> Job | None:
    """The job this submission was cloned from, its masked values restored into `data`."""
    source_id = form.cleaned_data.get("clone")
    if not source_id:
        return None
    source = access_job(request.user, source_id, write=True)
    if isinstance(data.get("env"), dict):
        data["env"] = unmask_env(data["env"], source)
    return source


def _clone_initial(request: HttpRequest) -> dict[str, Any] | None:
    """The form's fields from the job named by `?clone=<id>` (one the user may see), to edit
    before submitting again."""
    source = request.GET.get("clone")
    if not source:
        return None
    return clone_initial(access_job(request.user, source, write=True))


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
