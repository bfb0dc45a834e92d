"""`GET /api/v1/efficiency/`: GPU-hours allocated against used, waste and its cost, energy;
by job (with the right-sizing hint), user or team; scoped as `/api/v1/usage/` is."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta
from typing import Any

from django.utils.translation import gettext as _
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from base.errors import FieldErrors
from billing.api import PERIOD_PARAMETERS
from billing.efficiency import EFFICIENCY_GROUPS, EfficiencyReport, efficiency_report
from billing.prices import currency
from billing.query import parse_period
from tenants.access import access_team


def parse_group(params: Mapping[str, Any], default: str) -> str:
    group = params.get("group_by") or default
    if group not in EFFICIENCY_GROUPS:
        choices = ", ".join(EFFICIENCY_GROUPS)
        raise FieldErrors({"group_by": _("must be one of %(choices)s") % {"choices": choices}})
    return str(group)


class EfficiencyFiguresSerializer(serializers.Serializer):
    allocated_gpu_hours = serializers.DecimalField(max_digits=24, decimal_places=4)
    used_gpu_hours = serializers.DecimalField(max_digits=24, decimal_places=4)
    wasted_gpu_hours = serializers.DecimalField(max_digits=24, decimal_places=4)
    unmeasured_gpu_hours = serializers.DecimalField(max_digits=24, decimal_places=4)
    utilisation_pct = serializers.DecimalField(max_digits=5, decimal_places=1, allow_null=True)
    wasted_cost = serializers.DecimalField(max_digits=24, decimal_places=2)
    energy_joules = serializers.FloatField()
    energy_kwh = serializers.FloatField()


class EfficiencyRowSerializer(EfficiencyFiguresSerializer):
    job = serializers.IntegerField(required=False)
    name = serializers.CharField(required=False)
    user = serializers.CharField(required=False)
    team = serializers.CharField(required=False)
    gpus = serializers.IntegerField(required=False)
    hint = serializers.CharField(required=False, help_text="Right-sizing; empty when none.")


class EfficiencySerializer(serializers.Serializer):
    currency = serializers.CharField()
    period = serializers.DictField(child=serializers.DateField())
    group_by = serializers.ChoiceField(choices=EFFICIENCY_GROUPS)
    rows = EfficiencyRowSerializer(many=True)
    total = EfficiencyFiguresSerializer()


def efficiency_body(report: EfficiencyReport) -> dict[str, Any]:
    return {
        "currency": currency(),
        "period": {"from": report.period.start, "to": report.period.end - timedelta(days=1)},
        "group_by": report.group_by,
        "rows": report.rows,
        "total": report.total.as_dict(),
    }


class EfficiencyView(APIView):
    """`GET /api/v1/efficiency/`: in a period, GPU-hours allocated, used (allocated × average
    utilisation), wasted and their cost, unmeasured (no samples), and energy.

    An admin sees every team, a lead their team (by member: `group_by=user`), a member their
    own jobs."""

    @extend_schema(
        parameters=[
            *PERIOD_PARAMETERS,
            OpenApiParameter(
                "group_by",
                OpenApiTypes.STR,
                description=f"one of {', '.join(EFFICIENCY_GROUPS)} (default job)",
            ),
            OpenApiParameter("team", OpenApiTypes.STR, description="Team slug."),
        ],
        responses={200: EfficiencySerializer},
    )
    def get(self, request: Request) -> Response:
        params = request.query_params
        period, group = parse_period(params), parse_group(params, "job")
        team = access_team(request.user, params["team"]) if params.get("team") else None
        report = efficiency_report(request.user, period, group, team=team)
        return Response(EfficiencySerializer(efficiency_body(report)).data)
