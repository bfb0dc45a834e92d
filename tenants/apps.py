from django.apps import AppConfig


class TenantsConfig(AppConfig):
    name = "tenants"
    verbose_name = "Teams"

    def ready(self) -> None:
        from tenants import schema  # noqa: F401  (registers the token scheme with the schema)
