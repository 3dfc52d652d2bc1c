from __future__ import annotations

import os
import secrets

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from agents import workspace_quota
from runs import actions
from runs.models import Command as CommandRow
from runs.models import Run
from runs.store.sql import store
from zenweb.private_files import write_private

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
        demo = parser.add_mutually_exclusive_group()
        demo.add_argument(
            "--demo",
            action="store_true",
            help="start the demo runs even with a real model configured or in services mode (they spend its tokens)",
        )
        demo.add_argument("--no-demo", action="store_true", help="do not start the demo runs")

    def handle(self, *args, host: str, port: int, demo: bool, no_demo: bool, **options):
        from zenweb import embedded

        if not 0 < port < 65536:
            raise CommandError(f"--port must be a port number from 1 to 65535, got {port}")
        try:
            embedded.check_address(host, port)
        except OSError as exc:
            raise CommandError(_cannot_serve(host, port, exc.strerror or str(exc))) from exc
        database_problem = store().database_problem()
        if database_problem:
            raise CommandError(database_problem)
        for workflow, created in actions.do_load_catalog(settings.ZENWEB_CATALOG_DIR):
            if created:
                self.stdout.write(f"catalog: registered {workflow}")
        admin, login = self._admin()
        if settings.EMBEDDED:
            embedded.start_worker_thread()
            embedded.resume_interrupted_runs(self.stdout)
            self.stdout.write("embedded mode: SQLite, in-process Celery worker, in-memory channel layer")
        else:
            self.stdout.write("services mode: start workers with `celery -A zenweb worker`")
        self.stdout.write(_disk_quota())
        base = f"http://{host}:{port}"
        self.stdout.write(self.style.SUCCESS(f"zenweb is at {base}/"))
        self.stdout.write(login)
        self.stdout.write(f"to watch a run move: log in, then press “Watch a demo” on {base}/ (about 25 s, offline)")
        if self._wants_demo(demo=demo, no_demo=no_demo):
            self._start_demos(admin, base)
        try:
            embedded.serve(host, port, listening=lambda: self.stdout.write(f"listening on {base}/"))
        except OSError as exc:
            raise CommandError(_cannot_serve(host, port, str(exc))) from exc

    def _wants_demo(self, *, demo: bool, no_demo: bool) -> bool:
        """Demo runs start by themselves only where they cost nothing: the
        embedded default on the scripted provider. A real model would be
        sent their prompts unasked, so it takes ``--demo``."""
        if demo or no_demo:
            return demo
        model = os.environ.get("ZENWEB_LLM", "").strip().lower()
        if model not in ("", "scripted"):
            self.stdout.write(f"demo runs: not started (ZENWEB_LLM={model} would spend its tokens; pass --demo)")
            return False
        if not settings.EMBEDDED:
            self.stdout.write("demo runs: not started in services mode (pass --demo)")
            return False
        return True

    def _start_demos(self, admin, base: str) -> None:
        """Start the demo runs and the demo command, each unless it exists
        already: a restart shows the ones it started before."""
        offered = actions.offered_workflows()
        for name in DEMO_WORKFLOWS:
            label = f"demo run of {name}"
            run = Run.objects.filter(command=label).order_by("-pk").first()
            if run is None:
                workflow = offered.get(name)
                if workflow is None:  # not in the catalog, or staff retired it
                    continue
                try:
                    run = actions.do_create_run(workflow, {}, user=admin, command=label)
                except actions.TooManyRuns as exc:
                    self.stdout.write(f"demo run of {name}: not started ({exc})")
                    continue
            self.stdout.write(f"demo run: {base}/runs/{run.pk}/ ({name})")
        earlier = CommandRow.objects.filter(text=DEMO_COMMAND, created_by=admin).exclude(run=None).order_by("-pk")
        command = earlier.select_related("run__workflow").first()
        if command is None:
            self._demo_command(admin, base)
        else:
            assert command.run is not None  # picked among commands that started a run
            self.stdout.write(
                f"demo command: {DEMO_COMMAND!r} started {base}/runs/{command.run_id}/ ({command.run.workflow.name})"
            )

    def _demo_command(self, admin, base: str) -> None:
        from runs.actions.commands import do_command

        try:
            command = do_command(DEMO_COMMAND, user=admin)
        except actions.TooManyRuns as exc:
            self.stdout.write(f"demo command: {DEMO_COMMAND!r} started no run: {exc}")
            return
        if command.run_id is None:  # a catalog without `research`: the answer says why
            result = command.result or {}
            answer = result.get("error") or result.get("message") or command.status
            self.stdout.write(f"demo command: {DEMO_COMMAND!r} started no run: {answer}")
            return
        assert command.run is not None
        self.stdout.write(
            f"demo command: {DEMO_COMMAND!r} started {base}/runs/{command.run_id}/ ({command.run.workflow.name})"
        )

    def _admin(self):
        """The local admin login and how to log in as it. Created on first
        start, then never touched: a password its user changed stays changed.
        Its password is ZENWEB_ADMIN_PASSWORD when set (read only then), else
        a random one, printed once and kept in var/admin_password (0600)."""
        users = get_user_model()
        admin = users.objects.filter(username="admin").first()
        if admin is not None:
            return admin, f"log in as {admin.username!r} (`manage.py changepassword admin` sets a new password)"
        password = os.environ.get("ZENWEB_ADMIN_PASSWORD")
        if password:
            admin = users.objects.create_superuser("admin", password=password)
            return admin, f"created {admin.username!r}: log in with the password in ZENWEB_ADMIN_PASSWORD"
        password = secrets.token_urlsafe(12)
        admin = users.objects.create_superuser("admin", password=password)
        path = settings.DATA_DIR / "admin_password"
        write_private(path, password)
        return admin, f"created {admin.username!r}: log in with password {password!r} (kept in {path})"


def _disk_quota() -> str:
    """How run workspaces' disk quotas hold on this host (docs/sandbox.md)."""
    why = workspace_quota.checked_only(settings.ZENWEB_SANDBOX.workspace_fs)
    if not why:
        return "workspace disk quotas: enforced, each workspace its own file system"
    return f"workspace disk quotas: only checked every 0.5 s, not enforced ({why})"


def _cannot_serve(host: str, port: int, why: str) -> str:
    return f"cannot serve on {host}:{port}: {why}. Another port: make run PORT={port + 1}, or --port {port + 1}"
