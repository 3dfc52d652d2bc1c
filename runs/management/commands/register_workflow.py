from __future__ import annotations

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from agents.spec import WorkflowValidationError, workflow_warnings
from runs.actions.catalog import do_register_workflow, workflow_spec


class Command(BaseCommand):
    help = "Validate a workflow YAML file and register it as the next version of its name."

    def add_arguments(self, parser):
        parser.add_argument("path")

    def handle(self, *args, path: str, **options):
        try:
            text = Path(path).read_text()
        except OSError as exc:
            raise CommandError(f"{path}: cannot read: {exc.strerror}") from None
        try:
            workflow, created = do_register_workflow(text, path)
        except WorkflowValidationError as exc:
            # Every problem, one per line, as file:line: field: message.
            raise CommandError(f"{len(exc.problems)} problem(s):\n{exc}") from None
        self.stdout.write(f"{'registered' if created else 'unchanged '} {workflow}")
        # What it uses that zenweb accepts but does not run yet: no run of it starts.
        for warning in workflow_warnings(workflow_spec(workflow), text, path):
            self.stdout.write(str(warning))
