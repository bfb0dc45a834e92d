"""`/api/v1/sweeps/`: submit a sweep in one request, list and read sweeps with their members'
states, cancel the rest of a sweep, clone it. `urls` is what portal/urls.py includes."""

from __future__ import annotations

from typing import Any

from django.db.models import Count
from django.urls import path
from drf_spectacular.utils import extend_schema
from rest_framework import mixins, serializers, status
from rest_framework.request import Request
from rest_framework.response import Response

from base.auth import signed_in
from jobs.api import team_for_submission
from jobs.models import Job, State, Sweep
from jobs.reasons import reason_text
from jobs.spec import masked_env
from jobs.sweeps import (
    access_sweep,
    cancel_sweep,
    clone_sweep,
    member_states,
    parse_sweep,
    stored_plan,
    submit_sweep,
)
from tenants.viewsets import TenantViewSet


class SweepSerializer(serializers.ModelSerializer[Sweep]):
    team = serializers.CharField(source="team.slug")
    owner = serializers.CharField(source="owner.username")
    states = serializers.SerializerMethodField()

    class Meta:
        model = Sweep
        fields = ["id", "name", "team", "owner", "size", "max_parallel", "created_at"]
        fields += ["cloned_from", "states"]
        read_only_fields = fields

    def get_states(self, sweep: Sweep) -> dict[str, int]:
        known = self.context.get("states")
        if known is not None:
            return dict(known.get(sweep.pk, {}))
        return member_states(sweep)


def _states_of(sweeps: list[Sweep]) -> dict[int, dict[str, int]]:
    """Members per state of each sweep on a page, in one query."""
    found: dict[int, dict[str, int]] = {sweep.pk: {} for sweep in sweeps}
    if not sweeps:
        return found
    rows = (
        Job.unscoped.filter(sweep__in=sweeps)
        .order_by()
        .values_list("sweep_id", "state")
        .annotate(n=Count("id"))
    )
    for sweep_id, state, count in rows:
        found[sweep_id][state] = count
    return {pk: {s: c[s] for s in State.values if s in c} for pk, c in found.items()}


def members(sweep: Sweep) -> list[dict[str, Any]]:
    """Each member's id, index, parameters, state and why it waits, in index order."""
    plan = list(stored_plan(sweep).members())
    rows = (
        Job.objects.for_team(sweep.team)
        .filter(sweep=sweep)
        .order_by("sweep_index")
        .values_list(
            "id", "sweep_index", "name", "state", "pending_code", "pending_figures",
            "pending_message", "estimated_start",
        )
    )  # fmt: skip
    return [
        {
            "id": job_id,
            "index": index,
            "name": name,
            "params": plan[index] if index is not None and index < len(plan) else {},
            "state": state,
            "reason": reason_text(code, figures or {}, message) if code else "",
            "estimated_start": estimated,
        }
        for job_id, index, name, state, code, figures, message, estimated in rows
    ]


def sweep_detail(sweep: Sweep) -> dict[str, Any]:
    spec = dict(sweep.spec)
    spec["env"] = masked_env(spec.get("env") or {})
    return {**SweepSerializer(sweep).data, "spec": spec, "members": members(sweep)}


class SweepViewSet(mixins.ListModelMixin, TenantViewSet):
    model = Sweep
    related = ("team", "owner")
    serializer_class = SweepSerializer
    lookup_url_kwarg = "sweep_id"

    def list(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        """The sweeps you can see, newest first, with their members per state."""
        page = self.paginate_queryset(self.get_queryset()) or []
        states = _states_of(list(page))
        data = SweepSerializer(page, many=True, context={"states": states}).data
        return self.get_paginated_response(data)

    @extend_schema(responses={200: SweepSerializer})
    def retrieve(self, request: Request, sweep_id: int) -> Response:
        """A sweep, its spec (environment masked) and every member's state."""
        return Response(sweep_detail(access_sweep(request.user, sweep_id)))

    @extend_schema(responses={201: SweepSerializer})
    def create(self, request: Request) -> Response:
        """Submit a job spec with `sweep:` (array or params): the sweep and all its members."""
        spec, plan = parse_sweep(request.data)
        team = team_for_submission(request.user, spec.team)
        sweep = submit_sweep(team, spec, plan, acting_user=signed_in(request))
        answer = {**SweepSerializer(sweep, context={"states": {}}).data}
        answer["states"] = {State.QUEUED: sweep.size}
        return Response(answer, status=status.HTTP_201_CREATED)

    @extend_schema(request=None, responses={200: SweepSerializer})
    def cancel(self, request: Request, sweep_id: int) -> Response:
        """Cancel every member that has not ended."""
        sweep = access_sweep(request.user, sweep_id, write=True)
        cancelled = cancel_sweep(sweep, acting_user=signed_in(request))
        return Response({**SweepSerializer(sweep).data, "cancelled": cancelled})

    @extend_schema(responses={201: SweepSerializer})
    def clone(self, request: Request, sweep_id: int) -> Response:
        """Submit the sweep's spec again, optionally under a new `name`."""
        sweep = access_sweep(request.user, sweep_id, write=True)
        name = request.data.get("name") if isinstance(request.data, dict) else None
        copy = clone_sweep(sweep, acting_user=signed_in(request), name=name)
        answer = {**SweepSerializer(copy, context={"states": {}}).data}
        answer["states"] = {State.QUEUED: copy.size}
        return Response(answer, status=status.HTTP_201_CREATED)


urls = [
    path(
        "sweeps/",
        SweepViewSet.as_view({"get": "list", "post": "create"}),
        name="sweep-list-api",
    ),
    path(
        "sweeps/<int:sweep_id>/",
        SweepViewSet.as_view({"get": "retrieve"}),
        name="sweep-detail-api",
    ),
    path(
        "sweeps/<int:sweep_id>/cancel/",
        SweepViewSet.as_view({"post": "cancel"}),
        name="sweep-cancel-api",
    ),
    path(
        "sweeps/<int:sweep_id>/clone/",
        SweepViewSet.as_view({"post": "clone"}),
        name="sweep-clone-api",
    ),
]
