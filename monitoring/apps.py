from django.apps import AppConfig


class MonitoringConfig(AppConfig):
    name = "monitoring"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from cluster.controller import add_duties
        from monitoring.duties import controller_duties

        add_duties(controller_duties)  # alerts and the fault loop, without cluster importing us
