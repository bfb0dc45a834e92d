"""A user's own notifications: the list, and marking them read."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from base.auth import signed_in
from notifications.models import Notification

PAGE_SIZE = 50


@login_required
def notification_list(request: HttpRequest) -> HttpResponse:
    mine = Notification.objects.filter(user=signed_in(request))
    page = Paginator(mine, PAGE_SIZE).get_page(request.GET.get("page"))
    return render(request, "notifications/list.html", {"page": page, "query": ""})


@login_required
@require_POST
def notifications_read(request: HttpRequest) -> HttpResponse:
    """Mark the user's notifications read: those listed in `id`, or all of them."""
    mine = Notification.objects.filter(user=signed_in(request), read=False)
    ids = [int(i) for i in request.POST.getlist("id") if i.isdigit()]
    if ids:
        mine = mine.filter(pk__in=ids)
    mine.update(read=True)
    return redirect("notification-list")
