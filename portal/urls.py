"""URL map: pages, the REST API under /api/v1/, its schema and docs, and the Django admin."""

from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path
from django.views.i18n import JavaScriptCatalog
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView
from rest_framework.routers import DefaultRouter

from audit.api import AuditViewSet
from billing.api import (
    AdjustmentView,
    BudgetListView,
    BudgetView,
    PriceView,
    QueueMultiplierView,
    StatementView,
    UsageView,
)
from billing.efficiency_api import EfficiencyView
from cluster import dry_run
from cluster.api import NodeViewSet
from jobs import sweeps_api
from jobs.api import JobViewSet
from monitoring import alerts_api, incidents_api
from monitoring.api import JobLogView, JobMetricsView, TeamLiveView
from monitoring.metrics import metrics_view
from portal import health
from quotas.api import GpuTypeViewSet, QueueViewSet, QuotaViewSet
from tenants.api import MemberViewSet, MeView, TeamViewSet, TokenView
from tenants.oidc import CallbackView, SignInView


class Router(DefaultRouter):
    include_format_suffixes = False  # one URL per resource; JSON is the format


router = Router()
router.register("teams", TeamViewSet, basename="team")
router.register("gpu-types", GpuTypeViewSet, basename="gpu-type")
router.register("quotas", QuotaViewSet, basename="quota")
router.register("queues", QueueViewSet, basename="queue")
router.register("jobs", JobViewSet, basename="job")
router.register("audit", AuditViewSet, basename="audit")
router.register("nodes", NodeViewSet, basename="node")

members = MemberViewSet.as_view({"get": "list", "post": "create"})
member = MemberViewSet.as_view({"get": "retrieve", "patch": "partial_update", "delete": "destroy"})

api_v1 = [
    path("teams/<slug:team_slug>/members/", members, name="team-members"),
    path("teams/<slug:team_slug>/members/<str:username>/", member, name="team-member"),
    path("me/", MeView.as_view(), name="me"),
    path("auth/token/", TokenView.as_view(), name="auth-token"),
    path("jobs/<int:job_id>/logs/", JobLogView.as_view(), name="job-logs"),
    path("jobs/<int:job_id>/metrics/", JobMetricsView.as_view(), name="job-metrics"),
    path("teams/<slug:team_slug>/live/", TeamLiveView.as_view(), name="team-live"),
    path("usage/", UsageView.as_view(), name="usage-api"),
    path("efficiency/", EfficiencyView.as_view(), name="efficiency-api"),
    path("prices/", PriceView.as_view(), name="prices-api"),
    path("prices/queues/", QueueMultiplierView.as_view(), name="queue-multiplier-api"),
    path("statements/", StatementView.as_view(), name="statements-api"),
    path("statements/adjustments/", AdjustmentView.as_view(), name="adjustments-api"),
    path("budgets/", BudgetListView.as_view(), name="budgets-api"),
    path("budgets/<slug:team_slug>/", BudgetView.as_view(), name="budget-api"),
    # Before the router's: its jobs/<pk>/ would take jobs/dry-run/.
    *dry_run.urls,
    *sweeps_api.urls,
    *alerts_api.urls,
    *incidents_api.urls,
    *router.urls,
]

urlpatterns = [
    path("api/v1/", include(api_v1)),
    path("api/schema/", SpectacularAPIView.as_view(), name="schema"),
    path("api/docs/", SpectacularSwaggerSplitView.as_view(url_name="schema"), name="api-docs"),
    path("accounts/login/", auth_views.LoginView.as_view(), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    # The organisation's sign-in (tenants/oidc.py): 404 unless OIDC_RP_CLIENT_ID is set.
    path("oidc/authenticate/", SignInView.as_view(), name="oidc_authentication_init"),
    path("oidc/callback/", CallbackView.as_view(), name="oidc_authentication_callback"),
    path("admin/", admin.site.urls),
    path("i18n/", include("django.conf.urls.i18n")),  # set_language: the header's switcher
    path("jsi18n/", JavaScriptCatalog.as_view(), name="javascript-catalog"),  # the pages' scripts
    path("metrics", metrics_view, name="metrics"),  # Prometheus, with METRICS_TOKEN
    path("healthz", health.healthz, name="healthz"),  # probes: no tenant data, no detail
    path("readyz", health.readyz, name="readyz"),
    path("", include("portal.pages")),
]

# The portal's own error pages (portal/errors.py): no traceback to anyone unless DEBUG=1.
handler400 = "portal.errors.bad_request"
handler403 = "portal.errors.permission_denied"
handler404 = "portal.errors.page_not_found"
handler500 = "portal.errors.server_error"
