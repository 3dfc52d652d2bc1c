"""What zenweb stores: the catalog, runs, their steps, messages and events.

Every change to a run is written through runs/actions/, which also writes
the Event that records it, in the same transaction.

Django looks for an app's models in ``runs.models``: every model is imported
here, in the order they were declared when this was one module.

catalog.py     Workflow: one version of a catalog entry
runs.py        Run and Step
messages.py    Message (a mailbox entry) and Event (the run's journal)
tools.py       ToolCall, ToolExecution (the side-effect journal), Artifact, Claim
commands.py    Command: a free-text command and the coordinator's answer
approvals.py   Approval and ApprovalDecision
api_tokens.py  ApiToken, for scripts calling the JSON API
outbox.py      UnsentTask: a task to publish again
workers.py     WorkerProcess: a process that runs tasks, and its heartbeat
created_tools.py  CreatedTool: a tool a coordinator created, approved by a person
"""

from __future__ import annotations

# In declaration order, not sorted: Django registers the models in the order
# they are imported, and flush, dumpdata and the admin list them that way.
# isort: off
from runs.models.catalog import Workflow
from runs.models.runs import Run, Step
from runs.models.messages import Event, Message
from runs.models.tools import Artifact, Claim, ToolCall, ToolExecution
from runs.models.commands import Command
from runs.models.approvals import Approval, ApprovalDecision
from runs.models.api_tokens import ApiToken
from runs.models.outbox import UnsentTask
from runs.models.workers import WorkerProcess
from runs.models.created_tools import CreatedTool
# isort: on

__all__ = [
    "ApiToken",
    "Approval",
    "ApprovalDecision",
    "Artifact",
    "Claim",
    "Command",
    "CreatedTool",
    "Event",
    "Message",
    "Run",
    "Step",
    "ToolCall",
    "ToolExecution",
    "UnsentTask",
    "Workflow",
    "WorkerProcess",
]
