from django.apps import AppConfig


class TenantsConfig(AppConfig):
    name = "tenants"
    verbose_name = "Teams"

    def ready(self) -> None:
        from django.contrib.auth.signals import user_logged_in

        from tenants import schema  # noqa: F401  (registers the token scheme with the schema)
        from tenants.language import store_language_at_login

        # A user's stored language goes into the session once, at login: pages ask no query.
        user_logged_in.connect(store_language_at_login, dispatch_uid="tenants.language")
