from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from agents.spec import load_workflow, validate_workflow
from runs.actions import REGISTRY


class Command(BaseCommand):
    help = "Check workflow YAML files; print every problem as file:line: field: message."

    def add_arguments(self, parser):
        parser.add_argument("paths", nargs="+")

    def handle(self, *args, paths: list[str], **options):
        failed = 0
        for path in paths:
            problems = validate_workflow(path, known_tools=REGISTRY.names())
            if problems:
                failed += 1
                for problem in problems:
                    self.stderr.write(str(problem))
            else:
                spec = load_workflow(path, known_tools=REGISTRY.names())
                self.stdout.write(f"{path}: ok: {spec.summary()}")
        if failed:
            raise CommandError(f"{failed} of {len(paths)} workflow file(s) are invalid")
