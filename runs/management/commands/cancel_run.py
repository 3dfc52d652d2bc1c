from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from runs.actions import do_cancel_run
from runs.models import Run


class Command(BaseCommand):
    help = "Cancel a run: its steps stop at their next turn, every later message drops as workflow-cancelled."

    def add_arguments(self, parser):
        parser.add_argument("run_id", type=int)
        parser.add_argument("--reason", default="cancelled from the command line")

    def handle(self, *args, run_id: int, reason: str, **options):
        try:
            run = Run.objects.get(pk=run_id)
        except Run.DoesNotExist:
            raise CommandError(f"no run {run_id}") from None
        if not do_cancel_run(run.pk, reason):
            raise CommandError(f"run {run_id} already ended {run.status}")
        self.stdout.write(f"run {run_id} cancelled")
