"""Websocket routes. Each consumer checks the user and the membership at connect."""

from django.urls import path

from jobs.consumers import TeamJobsConsumer
from monitoring.consumers import ClusterConsumer, JobConsumer

websocket_urlpatterns = [
    path("ws/jobs/<int:job_id>/", JobConsumer.as_asgi()),
    path("ws/teams/<slug:team_slug>/", TeamJobsConsumer.as_asgi()),
    path("ws/cluster/", ClusterConsumer.as_asgi()),
]
