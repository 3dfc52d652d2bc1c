"""The actions and the store queue the tasks of runs/tasks.py by name
(runs/queue.py): a name that is no registered task would lose the work."""

from __future__ import annotations

from celery import current_app

from runs import queue


def test_every_name_the_actions_queue_is_a_registered_task():
    registered = set(current_app.tasks)
    missing = [name for name in queue.NAMES if name not in registered]
    assert not missing


def test_every_task_of_runs_tasks_can_be_queued_by_name():
    ours = {name for name in current_app.tasks if name.startswith("runs.tasks.")}
    assert ours == set(queue.NAMES)
