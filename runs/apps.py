from django.apps import AppConfig
from django.db.backends.signals import connection_created


class RunsConfig(AppConfig):
    name = "runs"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from zenweb import pg_text

        connection_created.connect(pg_text.on_connection_created, dispatch_uid="zenweb-pg-text")
