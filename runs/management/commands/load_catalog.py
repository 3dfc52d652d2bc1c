from __future__ import annotations

from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from agents.spec import WorkflowValidationError
from runs.actions import do_load_catalog


class Command(BaseCommand):
    help = "Register every workflow YAML of the catalog folder (a changed file becomes a new version)."

    def add_arguments(self, parser):
        parser.add_argument("directory", nargs="?", default=str(settings.ZENWEB_CATALOG_DIR))

    def handle(self, *args, directory: str, **options):
        if not Path(directory).is_dir():
            raise CommandError(f"no catalog folder {directory}")
        try:
            loaded = do_load_catalog(Path(directory))
        except WorkflowValidationError as exc:
            raise CommandError(f"the catalog has an invalid workflow:\n{exc}") from None
        for workflow, created in loaded:
            self.stdout.write(f"{'registered' if created else 'unchanged '} {workflow}")
        if not loaded:
            self.stdout.write(f"no workflow files (*.yaml) in {directory}")
