"""The notification pages, for portal/pages.py to include."""

from django.urls import path

from notifications import views

urlpatterns = [
    path("notifications/", views.notification_list, name="notification-list"),
    path("notifications/read/", views.notifications_read, name="notifications-read"),
]
