from django.apps import AppConfig
from django.db.backends.signals import connection_created


class RunsConfig(AppConfig):
    name = "runs"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # Imported once the app registry is ready (Django's rule for code
        # that loads models); runs.tasks is imported here so that its tasks
        # are registered in every process: the actions queue them by name
        # (runs/queue.py).
        from django.conf import settings

        from agents.tools.mcp import servers
        from runs import tasks  # noqa: F401 (registered by importing)
        from runs.store.sql import store

        # Stdio MCP servers start in the operator's sandbox (read once, here at the edge).
        servers.POOL.sandbox = settings.ZENWEB_SANDBOX
        connection_created.connect(store().on_connection_created, dispatch_uid="zenweb-pg-text")
