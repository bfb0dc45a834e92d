"""`/api/v1/usage/` (GPU-hours and cost over a period, grouped), `/api/v1/prices/`,
`/api/v1/statements/` and `/api/v1/budgets/`."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.http import Http404
from django.utils.translation import gettext as _
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import permissions, serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from base.auth import signed_in
from base.errors import FieldErrors
from billing.actions import (
    BUDGET_FIELDS,
    adjust_statement,
    delete_budget,
    set_budget,
    set_gpu_price,
    set_queue_multiplier,
    staff_only,
)
from billing.budgets import budget_statuses, team_budget
from billing.models import Budget, GpuPrice, QueueMultiplier, Statement
from billing.prices import currency
from billing.query import MAX_DAYS, parse_month, parse_usage_query
from billing.statements import statement_teams, team_statements
from billing.usage import GROUP_NAMES, Report, usage_report
from quotas.models import GpuType, Queue
from tenants.access import access_team

FIGURES = (
    "gpu_seconds",
    "gpu_hours",
    "cost",
    "credited_gpu_seconds",
    "credited_gpu_hours",
    "credited_cost",
)


class FiguresSerializer(serializers.Serializer):
    gpu_seconds = serializers.DecimalField(max_digits=24, decimal_places=3)
    gpu_hours = serializers.DecimalField(max_digits=24, decimal_places=4)
    cost = serializers.DecimalField(max_digits=24, decimal_places=2)
    credited_gpu_seconds = serializers.DecimalField(max_digits=24, decimal_places=3)
    credited_gpu_hours = serializers.DecimalField(max_digits=24, decimal_places=4)
    credited_cost = serializers.DecimalField(max_digits=24, decimal_places=2)


class UsageRowSerializer(FiguresSerializer):
    job = serializers.IntegerField(required=False)
    team = serializers.CharField(required=False)
    user = serializers.CharField(required=False)
    gpu_type = serializers.CharField(required=False)
    queue = serializers.CharField(required=False)
    day = serializers.DateField(required=False)


class TeamTotalSerializer(FiguresSerializer):
    team = serializers.CharField()


class UsageSerializer(serializers.Serializer):
    currency = serializers.CharField()
    period = serializers.DictField(child=serializers.DateField())
    group_by = serializers.ListField(child=serializers.ChoiceField(choices=GROUP_NAMES))
    rows = UsageRowSerializer(many=True)
    team_totals = TeamTotalSerializer(many=True)


def usage_body(report: Report) -> dict[str, Any]:
    """The answer of `/api/v1/usage/` as `UsageSerializer` would give it: its figures are
    strings already, so the view returns it as it is (serializing a month's groups cost a
    third of the request's CPU); tests/billing/test_usage_api.py checks the two agree."""
    rows = report.as_rows()
    if "job" in report.group_by:
        for row in rows:
            row["job"] = int(row["job"])
    return {
        "currency": currency(),
        "period": {"from": report.period.start, "to": report.period.end - timedelta(days=1)},
        "group_by": list(report.group_by),
        "rows": rows,
        "team_totals": [
            {"team": slug, **figures.as_dict()} for slug, figures in report.team_totals.items()
        ],
    }


PERIOD_PARAMETERS = [
    OpenApiParameter("period", OpenApiTypes.STR, description="a month, YYYY-MM"),
    OpenApiParameter("from", OpenApiTypes.DATE, description="first day (with to)"),
    OpenApiParameter("to", OpenApiTypes.DATE, description=f"last day, at most {MAX_DAYS} days on"),
]
"""The period of a usage or efficiency query, as `billing.query.parse_period` reads it."""


class UsageView(APIView):
    """`GET /api/v1/usage/`: GPU-hours and cost in a period, grouped as asked.

    An admin sees every team, a lead their team by member, a member their own jobs; everyone
    also gets the totals of each team they belong to. Credited time (ended by the platform:
    node lost, Xid, preemption) is shown apart and not billed."""

    @extend_schema(
        parameters=[
            *PERIOD_PARAMETERS,
            OpenApiParameter(
                "group_by",
                OpenApiTypes.STR,
                description=f"comma-separated, of {', '.join(GROUP_NAMES)} (default team)",
            ),
            OpenApiParameter("team", OpenApiTypes.STR, description="Team slug."),
        ],
        responses={200: UsageSerializer},
    )
    def get(self, request: Request) -> Response:
        query = parse_usage_query(request.query_params)
        team = access_team(request.user, query.team) if query.team else None
        report = usage_report(request.user, query.period, query.group_by, team=team)
        return Response(usage_body(report))


class GpuPriceSerializer(serializers.Serializer):
    gpu_type = serializers.SlugRelatedField(slug_field="name", queryset=GpuType.objects.all())
    effective_from = serializers.DateField()
    price_per_gpu_hour = serializers.DecimalField(max_digits=10, decimal_places=4, min_value=0)


class QueueMultiplierSerializer(serializers.Serializer):
    team = serializers.CharField(source="team.slug")
    queue = serializers.CharField(source="queue.name")
    multiplier = serializers.DecimalField(max_digits=6, decimal_places=3)


class CurrentPriceSerializer(serializers.Serializer):
    gpu_type = serializers.CharField(source="name")
    price_per_gpu_hour = serializers.DecimalField(max_digits=10, decimal_places=4)


class PriceBookSerializer(serializers.Serializer):
    currency = serializers.CharField()
    base_prices = CurrentPriceSerializer(many=True)
    gpu_prices = GpuPriceSerializer(many=True)
    queue_multipliers = QueueMultiplierSerializer(many=True)


class PriceView(APIView):
    """`/api/v1/prices/`: the price book. GET: GPU types' base prices, the dated entries that
    replace them from a day on, and the multipliers of the caller's teams' queues. POST (platform
    admins): a price from a day on, audited."""

    @extend_schema(responses={200: PriceBookSerializer})
    def get(self, request: Request) -> Response:
        multipliers = QueueMultiplier.objects.for_user(request.user).select_related("team", "queue")
        body = {
            "currency": currency(),
            "base_prices": GpuType.objects.all(),
            "gpu_prices": GpuPrice.objects.select_related("gpu_type"),
            "queue_multipliers": multipliers.order_by("team__slug", "queue__name"),
        }
        return Response(PriceBookSerializer(body).data)

    @extend_schema(request=GpuPriceSerializer, responses={201: GpuPriceSerializer})
    def post(self, request: Request) -> Response:
        user = signed_in(request)
        staff_only(user)  # before reading the body: nothing in it matters then
        given = GpuPriceSerializer(data=request.data)
        given.is_valid(raise_exception=True)
        entry = set_gpu_price(
            given.validated_data["gpu_type"],
            given.validated_data["effective_from"],
            given.validated_data["price_per_gpu_hour"],
            acting_user=user,
        )
        return Response(GpuPriceSerializer(entry).data, status=status.HTTP_201_CREATED)


class AdjustmentSerializer(serializers.Serializer):
    amount = serializers.DecimalField(max_digits=20, decimal_places=2)
    reason = serializers.CharField()
    actor = serializers.CharField(source="actor.username")
    created_at = serializers.DateTimeField()


class StatementSerializer(serializers.Serializer):
    team = serializers.CharField(source="team.slug")
    month = serializers.DateField()
    final = serializers.BooleanField()
    department = serializers.BooleanField(
        help_text="A department's: the sum of its sub-teams' (and its own), a line per team."
    )
    currency = serializers.CharField()
    figures = FiguresSerializer(source="figures.as_dict")
    lines = serializers.ListField(child=serializers.DictField())
    adjustments = AdjustmentSerializer(many=True)
    due = serializers.DecimalField(max_digits=20, decimal_places=2)


class StatementView(APIView):
    """`GET /api/v1/statements/?period=YYYY-MM[&team=]`: each team's statement of the month,
    final (stored, never changed) or a live draft, for its leads and platform admins; a
    department's sums its sub-teams', for the department's leads and platform admins."""

    @extend_schema(
        parameters=[
            OpenApiParameter("period", OpenApiTypes.STR, description="a month, YYYY-MM"),
            OpenApiParameter("team", OpenApiTypes.STR, description="Team slug."),
        ],
        responses={200: StatementSerializer(many=True)},
    )
    def get(self, request: Request) -> Response:
        period = parse_month(request.query_params)
        teams = statement_teams(request.user, request.query_params.get("team") or None)
        return Response(StatementSerializer(team_statements(teams, period), many=True).data)


class AdjustmentRequestSerializer(serializers.Serializer):
    team = serializers.SlugField()
    period = serializers.RegexField(r"^\d{4}-\d{2}$")
    amount = serializers.DecimalField(max_digits=20, decimal_places=2)
    reason = serializers.CharField(max_length=255)


class AdjustmentView(APIView):
    """`POST /api/v1/statements/adjustments/` (platform admins): correct a final statement by
    an amount, with the reason; audited. A draft is refused: it is still worked out live."""

    permission_classes = [permissions.IsAdminUser]

    @extend_schema(request=AdjustmentRequestSerializer, responses={201: AdjustmentSerializer})
    def post(self, request: Request) -> Response:
        user = signed_in(request)
        given = AdjustmentRequestSerializer(data=request.data)
        given.is_valid(raise_exception=True)
        data = given.validated_data
        team = access_team(user, data["team"])
        period = parse_month({"period": data["period"]})
        statement = Statement.objects.for_team(team).filter(month=period.start).first()
        if statement is None:
            raise FieldErrors(
                {
                    "period": _("%(month)s has no final statement yet: it is still a draft")
                    % {"month": data["period"]}
                }
            )
        adjustment = adjust_statement(statement, data["amount"], data["reason"], acting_user=user)
        return Response(AdjustmentSerializer(adjustment).data, status=status.HTTP_201_CREATED)


class QueueMultiplierRequestSerializer(serializers.Serializer):
    team = serializers.SlugField()
    queue = serializers.SlugField()
    multiplier = serializers.DecimalField(max_digits=6, decimal_places=3, min_value=0)


class QueueMultiplierView(APIView):
    """`POST /api/v1/prices/queues/` (platform admins): what a queue's GPU-hours cost against
    the price book (a preemptible queue is cheaper); audited."""

    permission_classes = [permissions.IsAdminUser]

    @extend_schema(
        request=QueueMultiplierRequestSerializer, responses={200: QueueMultiplierRequestSerializer}
    )
    def post(self, request: Request) -> Response:
        given = QueueMultiplierRequestSerializer(data=request.data)
        given.is_valid(raise_exception=True)
        data = given.validated_data
        team = access_team(request.user, data["team"])
        queue = Queue.objects.for_team(team).filter(name=data["queue"]).first()
        if queue is None:
            raise FieldErrors({"queue": _("team %(team)s has no queue %(queue)s") % data})
        set_queue_multiplier(queue, data["multiplier"], acting_user=signed_in(request))
        return Response(QueueMultiplierRequestSerializer(data).data)


class BudgetSerializer(serializers.Serializer):
    team = serializers.CharField(source="budget.team.slug")
    currency = serializers.CharField()
    amount = serializers.DecimalField(source="budget.amount", max_digits=14, decimal_places=2)
    warning_pct = serializers.IntegerField(source="budget.warning_pct")
    critical_pct = serializers.IntegerField(source="budget.critical_pct")
    hard_stop = serializers.BooleanField(source="budget.hard_stop")
    spent = serializers.DecimalField(max_digits=24, decimal_places=2)
    percent = serializers.IntegerField()
    held = serializers.BooleanField(help_text="The team's new jobs wait: budget spent, hard stop.")


class BudgetRequestSerializer(serializers.Serializer):
    team = serializers.SlugField()
    amount = serializers.DecimalField(max_digits=14, decimal_places=2)
    warning_pct = serializers.IntegerField(default=80)
    critical_pct = serializers.IntegerField(default=100)
    hard_stop = serializers.BooleanField(default=False)


class BudgetListView(APIView):
    """`/api/v1/budgets/`: GET the budgets of the teams the caller sees (every team's for an
    admin), each with what the team has spent of it this month. POST (platform admins, and a
    department's leads for its sub-teams): set a team's monthly budget, audited."""

    @extend_schema(responses={200: BudgetSerializer(many=True)})
    def get(self, request: Request) -> Response:
        budgets = Budget.objects.for_user(request.user).select_related("team")
        return Response(BudgetSerializer(budget_statuses(budgets), many=True).data)

    @extend_schema(request=BudgetRequestSerializer, responses={201: BudgetSerializer})
    def post(self, request: Request) -> Response:
        user = signed_in(request)
        given = BudgetRequestSerializer(data=request.data)
        given.is_valid(raise_exception=True)
        data = dict(given.validated_data)
        team = access_team(user, data.pop("team"))
        existed = Budget.objects.for_team(team).exists()
        set_budget(team, **data, acting_user=user)
        code = status.HTTP_200_OK if existed else status.HTTP_201_CREATED
        return Response(BudgetSerializer(team_budget(team)).data, status=code)


class BudgetView(APIView):
    """`/api/v1/budgets/<team>/`: GET a team's budget with this month's spending; PATCH or
    DELETE it (platform admins, and the department's leads), audited."""

    def _budget(self, request: Request, team_slug: str) -> Budget:
        team = access_team(request.user, team_slug)
        budget = Budget.objects.for_team(team).select_related("team").first()
        if budget is None:
            raise Http404(_("Team %(team)s has no budget.") % {"team": team.slug})
        return budget

    @extend_schema(responses={200: BudgetSerializer})
    def get(self, request: Request, team_slug: str) -> Response:
        return Response(
            BudgetSerializer(budget_statuses([self._budget(request, team_slug)])[0]).data
        )

    @extend_schema(request=BudgetRequestSerializer(partial=True), responses={200: BudgetSerializer})
    def patch(self, request: Request, team_slug: str) -> Response:
        budget = self._budget(request, team_slug)
        given = BudgetRequestSerializer(data=request.data, partial=True)
        given.is_valid(raise_exception=True)
        changes = {k: v for k, v in given.validated_data.items() if k != "team"}
        current = {f: getattr(budget, f) for f in BUDGET_FIELDS}
        set_budget(budget.team, **{**current, **changes}, acting_user=signed_in(request))
        return Response(BudgetSerializer(team_budget(budget.team)).data)

    @extend_schema(responses={204: None})
    def delete(self, request: Request, team_slug: str) -> Response:
        delete_budget(self._budget(request, team_slug), acting_user=signed_in(request))
        return Response(status=status.HTTP_204_NO_CONTENT)
