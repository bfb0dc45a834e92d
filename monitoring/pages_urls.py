"""Alert, incident and inspection pages, for portal/pages.py to include."""

from django.urls import path

from monitoring import incident_views, inspection_views
from monitoring.alerts import views as alert_views

urlpatterns = [
    path("alerts/", alert_views.alert_list, name="alert-list"),
    path(
        "alerts/<int:alert_id>/acknowledge/",
        alert_views.alert_acknowledge,
        name="alert-acknowledge",
    ),
    path("manage/alert-rules/", alert_views.rule_list, name="alert-rules"),
    path("manage/silences/", alert_views.silence_list, name="alert-silences"),
    path("incidents/", incident_views.incident_list, name="incident-list"),
    path("incidents/export.csv", incident_views.incident_export, name="incident-export"),
    path("incidents/<int:incident_id>/", incident_views.incident_detail, name="incident-detail"),
    path("inspections/", inspection_views.inspection_list, name="inspection-list"),
    path("inspections/run/", inspection_views.inspection_run, name="inspection-run"),
    path("inspections/<int:run_id>/", inspection_views.inspection_detail, name="inspection-detail"),
]
