from __future__ import annotations

import time

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from agents.spec import WorkflowValidationError
from runs import actions
from runs.models import Run
from runs.templatetags.zenweb import event_summary


class Command(BaseCommand):
    help = (
        "Start a run of a workflow file. With --follow, print its events live until it ends; "
        "the exit code is 0 when the run completed."
    )

    def add_arguments(self, parser):
        parser.add_argument("path")
        parser.add_argument("--input", action="append", default=[], metavar="NAME=VALUE", dest="inputs")
        parser.add_argument("--follow", action="store_true", help="print events as they happen")
        parser.add_argument("--timeout", type=float, default=None, help="give up waiting after this many seconds")

    def handle(self, *args, path: str, inputs: list[str], follow: bool, timeout: float | None, **options):
        values = {}
        for item in inputs:
            name, sep, value = item.partition("=")
            if not sep or not name:
                raise CommandError(f"--input {item!r}: expected NAME=VALUE")
            values[name] = value
        try:
            with open(path, encoding="utf-8") as handle:
                text = handle.read()
        except OSError as exc:
            raise CommandError(f"{path}: cannot read: {exc.strerror}") from None
        try:
            # Stored for this run only: a file tried out is not offered to commands.
            workflow, _ = actions.do_register_workflow(text, path, ad_hoc=True)
            run = actions.do_create_run(workflow, values, command=f"run_workflow {path}", ad_hoc=True)
        except WorkflowValidationError as exc:
            raise CommandError(f"{path} is not a valid workflow:\n{exc}", returncode=2) from None
        except actions.InputError as exc:
            raise CommandError(f"{path}: {exc}", returncode=2) from None
        self.stdout.write(f"run {run.pk} of {workflow} started")
        if settings.EMBEDDED:
            from zenweb.embedded import start_worker_thread

            start_worker_thread()
        elif not follow:
            return
        status = self._wait(run.pk, follow, timeout)
        if status != Run.Status.COMPLETED:
            error = Run.objects.values_list("error", flat=True).get(pk=run.pk)
            raise CommandError(f"run {run.pk} ended {status}" + (f": {error}" if error else ""))
        self.stdout.write(self.style.SUCCESS(f"run {run.pk} completed"))

    def _wait(self, run_id: int, follow: bool, timeout: float | None) -> str:
        deadline = time.monotonic() + timeout if timeout else None
        last_seq = 0
        try:
            while True:
                for event in Run.objects.get(pk=run_id).events.filter(seq__gt=last_seq).order_by("seq"):
                    last_seq = event.seq
                    if follow:
                        self.stdout.write(
                            f"#{event.seq:<4} {event.created:%H:%M:%S} {event.type:<26} "
                            f"{event.step_id or '-':<14} {event_summary(event)}"
                        )
                    if event.type == "workflow_end":
                        return Run.objects.values_list("status", flat=True).get(pk=run_id)
                if deadline and time.monotonic() > deadline:
                    raise CommandError(f"run {run_id} still running after {timeout:g}s")
                time.sleep(0.1)
        except KeyboardInterrupt:
            if settings.EMBEDDED:
                # The run's worker lives in this process and is about to stop.
                actions.do_cancel_run(run_id, "interrupted on the command line")
            raise CommandError(f"stopped following run {run_id}") from None
