"""Page URLs of every app, in one list so the isolation test can walk them."""

from django.urls import include, path

from audit import views as audit_views
from billing import efficiency_views
from billing import views as billing_views
from cluster import policy_views, whatif_views
from cluster import views as cluster_views
from jobs import sweep_views
from jobs import views as job_views
from monitoring import pages as monitoring_pages
from portal import dashboard, team_page
from quotas import views as quota_views
from tenants import views as team_views

urlpatterns = [
    path("", dashboard.dashboard, name="dashboard"),
    path("jobs/", job_views.job_list, name="job-list"),
    path("jobs/new/", job_views.job_new, name="job-new"),
    path("jobs/cancel/", job_views.job_cancel_many, name="job-cancel-many"),
    path("jobs/<int:job_id>/", job_views.job_detail, name="job-detail"),
    path("jobs/<int:job_id>/cancel/", job_views.job_cancel, name="job-cancel"),
    path("jobs/<int:job_id>/clone/", job_views.job_clone, name="job-clone"),
    path("sweeps/<int:sweep_id>/", sweep_views.sweep_detail, name="sweep-detail"),
    path("sweeps/<int:sweep_id>/cancel/", sweep_views.sweep_cancel, name="sweep-cancel"),
    path("sweeps/<int:sweep_id>/clone/", sweep_views.sweep_clone, name="sweep-clone"),
    path("teams/<slug:slug>/", team_page.team_detail, name="team-detail"),
    path("teams/<slug:slug>/members/", team_views.member_add, name="member-add"),
    path(
        "teams/<slug:slug>/members/<str:username>/",
        team_page.member_change,
        name="member-change",
    ),
    path("teams/<slug:slug>/queues/", quota_views.queue_save, name="queue-save"),
    path(
        "teams/<slug:slug>/queues/<int:queue_id>/delete/",
        quota_views.queue_delete,
        name="queue-delete",
    ),
    path("teams/<slug:slug>/quotas/", quota_views.subteam_quota_save, name="subteam-quota"),
    path("profile/", team_views.profile, name="profile"),
    path("language/", team_views.language_set, name="language-set"),
    path("profile/tokens/<str:prefix>/revoke/", team_views.token_revoke, name="token-revoke"),
    path("cluster/", monitoring_pages.cluster, name="cluster"),
    path("usage/", billing_views.usage_page, name="usage"),
    path("usage/statements/", billing_views.statements_page, name="statements"),
    path("usage/statements.csv", billing_views.statements_export, name="statements-export"),
    path("usage/efficiency/", efficiency_views.efficiency_page, name="efficiency"),
    path(
        "usage/efficiency/idle-policy/<slug:slug>/",
        efficiency_views.idle_policy_save,
        name="idle-policy-save",
    ),
    path("audit/", audit_views.audit_list, name="audit-list"),
    path("audit/export.csv", audit_views.audit_export, name="audit-export"),
    path("audit/verify/", audit_views.audit_verify, name="audit-verify"),
    path("manage/teams/", team_views.manage_teams, name="manage-teams"),
    path("manage/gpu-types/", quota_views.manage_gpu_types, name="manage-gpu-types"),
    path("manage/quotas/", quota_views.manage_quotas, name="manage-quotas"),
    path("manage/nodes/", cluster_views.node_list, name="manage-nodes"),
    path("manage/scheduling/", policy_views.scheduling_policy, name="manage-scheduling"),
    path("manage/whatif/", whatif_views.whatif_list, name="whatif-list"),
    path("manage/whatif/<int:whatif_id>/", whatif_views.whatif_detail, name="whatif-detail"),
    path("manage/nodes/<str:name>/cordon/", cluster_views.node_cordon, name="manage-node-cordon"),
    path("", include("notifications.urls")),
    path("", include("monitoring.pages_urls")),  # alerts, rules, silences, incidents
]
