from __future__ import annotations

import json
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from runs.actions.tooling import catalog_registry


class Command(BaseCommand):
    help = "Write every tool's id, description and JSON schemas to tool_schemas.json (Goa-AI's catalog shape)."

    def add_arguments(self, parser):
        parser.add_argument("path", nargs="?", help="file to write, or - for stdout (as --output)")
        parser.add_argument("--output", help="file to write, or - for stdout (default: tool_schemas.json)")

    def handle(self, *args, path: str | None, output: str | None, **options):
        if path and output and path != output:
            raise CommandError(f"give the file once: {path} or --output {output}")
        output = path or output or "tool_schemas.json"
        registry = catalog_registry()
        text = json.dumps(registry.catalog(), indent=2, sort_keys=True) + "\n"
        if output == "-":
            self.stdout.write(text, ending="")
            return
        try:
            Path(output).write_text(text)
        except OSError as exc:
            raise CommandError(f"cannot write {output}: {exc.strerror or exc}") from None
        self.stdout.write(f"wrote {len(registry.names())} tools to {output}")
