"""A step's writes through the ORM, each named for what it does: its end
(every end of a step but a last turn's, which the store's turns write, and
the coordinator's, which end_run writes), its resumes, its turns marked
queued or held for mail, its transcript after a call's result, a worker
step added."""

from __future__ import annotations

from datetime import datetime

from django.db.models import F, Value
from django.db.models.functions import Concat
from django.utils import timezone

from runs.models import Run, Step, ToolCall
from runs.store.sql.base import Statements


class StepWrites(Statements):
    def end_step(
        self, step: Step, status: str, *, error: str | None = None, output: str | None = None, only_from: str = ""
    ) -> bool:
        """``step`` ends ``status`` now, with its ``error`` and ``output``
        where given: set on ``step`` and written. ``only_from``: only if it
        still has that status (a conditional UPDATE). Whether it changed."""
        values: dict = {"status": status, "finished": timezone.now()}
        if error is not None:
            values["error"] = error
        if output is not None:
            values["output"] = output
        rows = Step.objects.filter(pk=step.pk)
        if only_from:
            rows = rows.filter(status=only_from)
        if not rows.update(**values):
            return False
        for name, value in values.items():
            setattr(step, name, value)
        return True

    def complete_as_reused(self, step: Step, before: Step) -> None:
        """``step`` (a fork's) completed now with ``before``'s (its parent
        run's) output, transcript and turns, no tokens (nothing was asked):
        set on ``step`` and written."""
        now = timezone.now()
        step.status = Step.Status.COMPLETED
        step.output, step.transcript, step.turns = before.output, before.transcript, before.turns
        step.started = step.finished = now
        step.reused_from = before
        fields = ["status", "output", "transcript", "turns", "started", "finished", "reused_from"]
        step.save(update_fields=fields)

    def retry_step(self, step: Step, attempt: int) -> None:
        """``step`` runs again as attempt ``attempt`` (a failed one's retry):
        a fresh transcript, turn count and wake cycles, started now (its own
        step timeout), no lease. The failed attempt's tool calls keep their
        rows, their ids marked with its attempt (the new attempt's model may
        name its calls alike); those still pending end cancelled."""
        calls = ToolCall.objects.filter(step_id=step.pk)
        calls.filter(status__in=ToolCall.PENDING).update(status=ToolCall.Status.CANCELLED, finished=timezone.now())
        marked = Concat(F("tool_call_id"), Value(f"@attempt-{attempt - 1}"))
        calls.exclude(tool_call_id__contains="@attempt-").update(tool_call_id=marked)
        values = {
            "attempt": attempt,
            "transcript": [],
            "turns": 0,
            "output": "",
            "error": "",
            "wake_cycles": 0,
            "held_since": None,
            "lease_owner": "",
            "lease_expires": None,
            "started": timezone.now(),
            "turn_queued": timezone.now(),
        }
        Step.objects.filter(pk=step.pk).update(**values)
        for name, value in values.items():
            setattr(step, name, value)

    def mark_resuming(self, step_pk: int, *, starts: bool) -> None:
        """Step ``step_pk`` is resumed for a message; a resume that ``starts``
        counts in its resumes."""
        Step.objects.filter(pk=step_pk).update(resuming=True, resumes=F("resumes") + (1 if starts else 0))

    def count_resume_turn(self, step: Step) -> bool:
        """One more turn of resumed ``step``, if it still resumes and no other
        worker took that turn: whether this one did."""
        return bool(Step.objects.filter(pk=step.pk, resuming=True, turns=step.turns).update(turns=F("turns") + 1))

    def end_resume(self, step_pk: int) -> bool:
        """Step ``step_pk`` no longer resumes: whether it did."""
        return bool(Step.objects.filter(pk=step_pk, resuming=True).update(resuming=False))

    def end_resumes(self, run: Run) -> None:
        """No step of ``run`` resumes any longer (the run ended)."""
        Step.objects.filter(run=run, resuming=True).update(resuming=False)

    def mark_turns_queued(self, step_pks: list[int], now: datetime) -> None:
        """The next turns of steps ``step_pks`` are queued at ``now``
        (Step.turn_queued): the sweeper queues them again if their tasks are lost."""
        Step.objects.filter(pk__in=step_pks).update(turn_queued=now)

    def wake_cycle(self, step: Step, cycle: int, now: datetime) -> None:
        """``step`` takes wake cycle ``cycle`` to read mail that came while it
        answered: held for mail since its first, its next turn queued at ``now``."""
        Step.objects.filter(pk=step.pk).update(wake_cycles=cycle, held_since=step.held_since or now, turn_queued=now)

    def save_transcript(self, step: Step, *, turn_queued: bool) -> None:
        """``step``'s transcript as set on it (a call's result put in), and
        with ``turn_queued`` its next turn's queued mark (Step.turn_queued)."""
        step.save(update_fields=["transcript", "turn_queued"] if turn_queued else ["transcript"])

    def add_worker_step(self, run: Run, values: dict) -> Step:
        """A worker step of ``run`` (``values``: field -> value), spawned by its coordinator."""
        return Step.objects.create(run=run, **values)
