from django.apps import AppConfig


class ClusterConfig(AppConfig):
    name = "cluster"
    verbose_name = "Cluster"

    def ready(self) -> None:
        from cluster import whatif_tasks  # noqa: F401  (registers run_whatif with the workers)
