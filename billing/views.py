"""`/usage/`: GPU-hours and cost by month. An admin sees every team, a lead their team by
member, a member their own jobs and their team's total; everyone their teams' budgets this
month against what was spent. `/usage/statements/`: the monthly statements of the teams one
leads (every team for an admin; a department's sums its teams'), and their CSV."""

from __future__ import annotations

import csv
from datetime import timedelta

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from base.errors import FieldErrors
from billing.budgets import budget_statuses
from billing.models import Budget
from billing.prices import currency
from billing.query import UsageQuery, parse_month, parse_usage_query
from billing.statements import LINE_GROUPS, TeamStatement, statement_teams, team_statements
from billing.usage import GROUP_NAMES, current_month, group_totals, led_team_ids, usage_report
from tenants.access import access_team


def _default_group(request: HttpRequest) -> str:
    if request.user.is_staff:
        return "team"
    return "user" if led_team_ids(request.user) else "job"


@login_required
def usage_page(request: HttpRequest) -> HttpResponse:
    params = {k: v for k, v in request.GET.items() if v}
    default = _default_group(request)
    try:
        query = parse_usage_query(params, default)
        error = ""
    except FieldErrors as exc:
        query, error = UsageQuery(current_month(), (default,), None), str(exc)
    team = access_team(request.user, query.team) if query.team else None
    report = usage_report(request.user, query.period, query.group_by, team=team)
    previous = query.period.start - timedelta(days=1)
    return render(
        request,
        "billing/usage.html",
        {
            "report": report,
            "rows": [
                ([(name, row[name]) for name in report.group_by], row) for row in report.as_rows()
            ],
            "total": group_totals(report.rows).as_dict(),
            "team_totals": [(slug, f.as_dict()) for slug, f in report.team_totals.items()],
            "currency": currency(),
            "month": query.period.start.strftime("%Y-%m"),
            "previous": previous.strftime("%Y-%m"),
            "next": query.period.end.strftime("%Y-%m"),
            "group_choices": GROUP_NAMES,
            "team": query.team or "",
            "error": error,
            "budgets": budget_statuses(
                Budget.objects.for_user(request.user).select_related("team")
            ),
        },
    )


def _statements(request: HttpRequest) -> tuple[list[TeamStatement], str, str]:
    """The statements the request asks for (`period`, `team`), the month, and any error."""
    try:
        period, error = parse_month(request.GET), ""
    except FieldErrors as exc:
        period, error = current_month(), str(exc)
    teams = statement_teams(request.user, request.GET.get("team") or None)
    return team_statements(teams, period), period.start.strftime("%Y-%m"), error


@login_required
def statements_page(request: HttpRequest) -> HttpResponse:
    """Each team's statement of a month, for its leads and platform admins; prints cleanly."""
    statements, month, error = _statements(request)
    return render(
        request,
        "billing/statements.html",
        {"statements": statements, "month": month, "error": error, "line_groups": LINE_GROUPS},
    )


CSV_FIGURES = ("gpu_hours", "cost", "credited_gpu_hours", "credited_cost")


@login_required
def statements_export(request: HttpRequest) -> HttpResponse:
    """The same statements as CSV: a row per line (per team of a department), per adjustment,
    and each statement's total due."""
    statements, month, _error = _statements(request)
    response = HttpResponse(content_type="text/csv")
    response["Content-Disposition"] = f'attachment; filename="statements-{month}.csv"'
    writer = csv.writer(response)
    writer.writerow(["team", "month", "status", "currency", "row", *LINE_GROUPS, *CSV_FIGURES])
    for s in statements:
        head = [s.team.slug, month, "final" if s.final else "draft", s.currency]
        for line in s.lines:
            if s.department:  # a line per team of it: its slug stands where a member would
                kind, groups = "team", [line["team"], "", ""]
            else:
                kind, groups = "line", [line[name] for name in LINE_GROUPS]
            writer.writerow([*head, kind, *groups, *(line[f] for f in CSV_FIGURES)])
        for a in s.adjustments:
            reason = a.reason if a.team_id == s.team.pk else f"{a.team.slug}: {a.reason}"
            writer.writerow([*head, "adjustment", reason, a.actor.username, "", "", a.amount])
        writer.writerow([*head, "due", "", "", "", "", s.due])
    return response
