from __future__ import annotations

from datetime import timedelta

from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone

from runs.actions.retention import count_purgeable, do_purge_runs


class Command(BaseCommand):
    help = (
        "Delete the runs that ended more than DAYS days ago, with their events, messages, steps, "
        "tool calls, artifacts, claims, approvals and workspaces. Runs under way are never touched."
    )

    def add_arguments(self, parser):
        parser.add_argument("--older-than", type=float, required=True, metavar="DAYS", help="days since a run ended")
        parser.add_argument("--dry-run", action="store_true", help="count what would be deleted, delete nothing")

    def handle(self, *args, older_than: float, dry_run: bool, **options):
        if not older_than > 0:
            raise CommandError(f"--older-than must be a positive number of days, got {older_than:g}")
        cutoff = timezone.now() - timedelta(days=older_than)
        when = f"ended before {cutoff:%Y-%m-%d %H:%M} UTC"
        if dry_run:
            found = count_purgeable(cutoff)
            self.stdout.write(f"would delete {found.runs} runs ({found.events:,} events) that {when}")
            return
        purged = do_purge_runs(cutoff)
        self.stdout.write(f"deleted {purged.runs} runs ({purged.events:,} events) that {when}")
