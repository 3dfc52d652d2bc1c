"""The demo a person starts from the runs page ("Watch a demo").

Its workflow (watch_demo.yaml, beside this file) is stored as an ad-hoc
version: it is offered nowhere (not in the catalog, the start form or to
commands) and the same text is stored once, however many demos start. Its
scripted agents wait a few seconds per turn, so the run lasts about half a
minute on the offline provider: long enough to watch steps start, a tool
call, a message forwarded and the end.
"""

from __future__ import annotations

from pathlib import Path

from runs import actions
from runs.models import Run

WORKFLOW_FILE = Path(__file__).with_name("watch_demo.yaml")
COMMAND = "Watch a demo"


def do_start_demo(user) -> Run:
    """Start a paced demo run for ``user``; TooManyRuns when they have too
    many under way (as any start)."""
    workflow, _ = actions.do_register_workflow(WORKFLOW_FILE.read_text(), str(WORKFLOW_FILE), ad_hoc=True)
    return actions.do_create_run(workflow, {}, user=user, command=COMMAND, ad_hoc=True)
