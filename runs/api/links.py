"""OpenAPI links: which operation a response's ids lead to (a command to its
run, a run to its cancel and its approvals' decisions). Readers of the
document follow them; the schemathesis test walks them as a client would
(create a command, read its run, cancel it, decide an approval)."""

from __future__ import annotations

from typing import Any


def _link(operation: str, parameter: str, pointer: str) -> dict[str, Any]:
    return {"operationId": operation, "parameters": {parameter: f"$response.body#{pointer}"}}


COMMAND_LINKS = {
    "ReadCommand": _link("command_detail", "command_id", "/id"),
    "ReadRun": _link("run_detail", "run_id", "/run/id"),
    "CancelRun": _link("run_cancel", "run_id", "/run/id"),
}
RUN_LINKS = {
    "CancelRun": _link("run_cancel", "run_id", "/id"),
    "DecideApproval": _link("approval_decide", "approval_id", "/approvals/0/id"),
}
CANCELLED_RUN = {"ReadRun": _link("run_detail", "run_id", "/id")}
PENDING_APPROVALS = {"DecideApproval": _link("approval_decide", "approval_id", "/approvals/0/id")}
