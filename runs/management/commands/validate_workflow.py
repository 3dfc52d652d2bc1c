from __future__ import annotations

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from agents.spec import load_workflow, validate_workflow, workflow_warnings
from runs.actions.catalog import known_tool_roles, offered_tool_name


class Command(BaseCommand):
    help = (
        "Check workflow YAML files; print every problem as file:line: field: message, "
        "and the warnings of valid ones (file:line: field: warning: ...)."
    )

    def add_arguments(self, parser):
        parser.add_argument("paths", nargs="+")

    def handle(self, *args, paths: list[str], **options):
        failed = 0
        # Files checked together may use the tools the others offer.
        offered = [name for path in paths if (name := _offered(path))]
        known = known_tool_roles(offered)
        for path in paths:
            problems = validate_workflow(path, known_tools=known)
            if problems:
                failed += 1
                for problem in problems:
                    self.stderr.write(str(problem))
            else:
                spec = load_workflow(path, known_tools=known)
                self.stdout.write(f"{path}: ok: {spec.summary()}")
                # What is accepted but not run yet, and expressions that read what no run gives.
                for warning in workflow_warnings(spec, Path(path).read_text(encoding="utf-8"), path):
                    self.stdout.write(str(warning))
        if failed:
            raise CommandError(f"{failed} of {len(paths)} workflow file(s) are invalid")


def _offered(path: str) -> str | None:
    try:
        return offered_tool_name(Path(path).read_text())
    except OSError:
        return None
