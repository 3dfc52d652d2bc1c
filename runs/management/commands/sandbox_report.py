"""manage.py sandbox_report: what the tool sandbox enforces on this host, and how."""

from __future__ import annotations

from django.conf import settings
from django.core.management.base import BaseCommand

from agents.sandbox import capabilities


class Command(BaseCommand):
    help = (
        "Say what the tool sandbox enforces on this host and how: bubblewrap, whole-call limits "
        "(cgroups) or per-process ones, each run's uid, user namespaces (docs/sandbox.md)."
    )

    def handle(self, *args, **options) -> None:
        for line in capabilities(settings.ZENWEB_SANDBOX):
            self.stdout.write(line)
