from __future__ import annotations

import secrets

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand

from runs import actions
from runs.models import Workflow

# Started on every `make run`: messaging through the hub, and workers the
# coordinator plans with real tools (bounded search, a price chart, files).
DEMO_WORKFLOWS = ("hub_and_spoke", "research_brief")
# And a command, as a person types one: the coordinator picks `research` from
# the catalog, whose run records claims with their sources.
DEMO_COMMAND = "Run research workflow for laptops under $1000"


class Command(BaseCommand):
    help = "Run zenweb in one process: load the catalog, start a worker (embedded mode), a demo run and daphne."

    def add_arguments(self, parser):
        parser.add_argument("--host", default="127.0.0.1")
        parser.add_argument("--port", type=int, default=8000)
        parser.add_argument("--no-demo", action="store_true", help="do not start the demo runs")

    def handle(self, *args, host: str, port: int, no_demo: bool, **options):
        from zenweb import embedded

        for workflow, created in actions.do_load_catalog(settings.ZENWEB_CATALOG_DIR):
            if created:
                self.stdout.write(f"catalog: registered {workflow}")
        admin, password = self._admin()
        if settings.EMBEDDED:
            embedded.start_worker_thread()
            embedded.resume_interrupted_runs(self.stdout)
            self.stdout.write("embedded mode: SQLite, in-process Celery worker, in-memory channel layer")
        else:
            self.stdout.write("services mode: start workers with `celery -A zenweb worker`")
        base = f"http://{host}:{port}"
        self.stdout.write(self.style.SUCCESS(f"zenweb is at {base}/"))
        self.stdout.write(f"log in as {admin.username!r} with password {password!r}")
        for name in () if no_demo else DEMO_WORKFLOWS:
            workflow = Workflow.objects.filter(name=name).order_by("-version").first()
            if workflow:
                run = actions.do_create_run(workflow, {}, user=admin, command=f"demo run of {name}")
                self.stdout.write(f"demo run: {base}/runs/{run.pk}/ ({name})")
        if not no_demo:
            self._demo_command(admin, base)
        embedded.serve(host, port)

    def _demo_command(self, admin, base: str) -> None:
        from runs.actions.commands import do_command

        command = do_command(DEMO_COMMAND, user=admin)
        if command.run_id is None:  # a catalog without `research`: the answer says why
            answer = command.result.get("error") or command.result.get("message") or command.status
            self.stdout.write(f"demo command: {DEMO_COMMAND!r} started no run: {answer}")
            return
        self.stdout.write(
            f"demo command: {DEMO_COMMAND!r} started {base}/runs/{command.run_id}/ ({command.run.workflow.name})"
        )

    def _admin(self):
        """The local admin login, created on first start with a random password
        kept beside the database (or ZENWEB_ADMIN_PASSWORD when set)."""
        import os

        users = get_user_model()
        path = settings.DATA_DIR / "admin_password"
        password = os.environ.get("ZENWEB_ADMIN_PASSWORD") or (
            path.read_text().strip() if path.exists() else secrets.token_urlsafe(12)
        )
        admin = users.objects.filter(username="admin").first()
        if admin is None:
            admin = users.objects.create_superuser("admin", password=password)
        elif not admin.check_password(password):
            admin.set_password(password)
            admin.save(update_fields=["password"])
        if "ZENWEB_ADMIN_PASSWORD" not in os.environ:
            path.write_text(password)
            path.chmod(0o600)
        return admin, password
