"""What the router carries and answers: messages and their types, why one
drops, and what a sender is told."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Literal

COORDINATOR = "coordinator"


class MessageType(StrEnum):
    INFO = "info"
    CANCEL = "cancel"
    CONTEXT_UPDATE = "context_update"
    RESUME_REPLY = "resume_reply"

    @classmethod
    def parse(cls, kind: str | None) -> MessageType:
        """Unknown kinds fall back to info, as zenflow's forward_to_agent does."""
        try:
            return cls(kind or cls.INFO)
        except ValueError:
            return cls.INFO


class DropReason(StrEnum):
    WORKFLOW_CANCELLED = "workflow-cancelled"
    TARGET_TERMINAL = "target-terminal"
    UNKNOWN_STEP = "unknown-step"
    MAILBOX_CLOSED_BY_FINALIZE = "mailbox-closed-by-finalize"
    MAX_WAKE_CYCLES = "max-wake-cycles"
    HOLD_TIMEOUT = "hold-timeout"
    MAILBOX_FULL = "mailbox-full"
    NO_TRANSCRIPT = "no-transcript"
    TRANSCRIPT_TOO_LARGE = "transcript-too-large"
    RESUME_SHUTDOWN = "resume-shutdown"
    RESOLVER_ERROR = "resolver-error"


@dataclass(frozen=True)
class RouterMessage:
    message_id: str
    sender: str
    recipient: str
    type: MessageType
    content: str
    created: float = field(default_factory=time.time)


@dataclass(frozen=True)
class SendResult:
    status: Literal["queued", "dropped", "rejected"]
    message_id: str
    reason: DropReason | None = None
    detail: str = ""

    @property
    def text(self) -> str:
        """What the sending model sees as its tool result."""
        if self.status == "queued":
            return f"queued: {self.message_id}"
        if self.status == "rejected":
            return self.detail
        text = f"dropped: {self.reason}"
        return f"{text}. {self.detail}" if self.detail else text
