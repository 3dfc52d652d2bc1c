"""A deterministic, offline provider. It drives the demo and the tests.

A step agent plays the ``script`` its workflow YAML gives it, one entry per
model turn (the turn is the number of assistant messages already in the
conversation, so any worker can pick up where another stopped). Without a
script a step answers once with a fixed sentence. The coordinator, unless it
has a script, follows a rule policy: a message that starts with ``for <step>:``
or ``@<step>:`` is forwarded to that step, any other message is narrated, and
when every step has finished it finalizes with their outputs. The workflow
handler (``agents.handler``), unless it has a script, picks a workflow by the
triggers and names the command mentions (``_workflow_handler_policy``).
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Sequence
from string import Template
from typing import TYPE_CHECKING, Any

from agents.llm import tokens
from agents.llm.base import (
    Completion,
    CompletionRequest,
    PartialCallback,
    ProviderError,
    RetryCallback,
    ToolCallRequest,
    Usage,
)

if TYPE_CHECKING:
    from agents.spec import ScriptTurn

ADDRESSED = re.compile(r"^\s*(?:@|for\s+)([a-z][a-z0-9_.\[\]-]{0,127})\s*:\s*(.+)$", re.S | re.I)


class ScriptedProvider:
    name = "scripted"

    def __init__(self, script: list[ScriptTurn] | None = None) -> None:
        self.script = list(script or [])
        self.calls = 0

    def complete(
        self,
        request: CompletionRequest,
        *,
        on_partial: PartialCallback | None = None,
        on_retry: RetryCallback | None = None,
    ) -> Completion:
        # A script answers at once, whole: nothing to stream or retry.
        self.calls += 1
        turn = sum(1 for m in request.messages if m.get("role") == "assistant")
        if self.script and turn < len(self.script):
            return self._play(request, self.script[turn], turn)
        if request.agent == "coordinator":
            return _coordinator_policy(request)
        if request.agent == "workflow_handler" and not self.script:
            return _workflow_handler_policy(request)
        if self.script:
            raise ProviderError(
                f"scripted provider: the script of agent {request.agent!r} has "
                f"{len(self.script)} turns and turn {turn + 1} was asked for"
            )
        return _answer(f"{request.agent} finished: {_first_line(request)}", request)

    def _play(self, request: CompletionRequest, entry: ScriptTurn, turn: int) -> Completion:
        if entry.delay:
            time.sleep(entry.delay)
        variables = request.variables
        if entry.fail is not None:
            raise ProviderError(_fill(entry.fail, variables))
        if entry.calls:
            calls = [
                ToolCallRequest(
                    id=f"call-{request.agent}-{turn + 1}-{n + 1}",
                    name=call.tool,
                    arguments=json.dumps(_fill(call.args, variables)),
                )
                for n, call in enumerate(entry.calls)
            ]
            return Completion(content=None, tool_calls=calls, usage=_usage(request, calls=calls))
        return _answer(_fill(entry.say or "", variables), request)


def _coordinator_policy(request: CompletionRequest) -> Completion:
    if request.messages and request.messages[-1].get("role") == "tool":
        return _answer("ok", request)
    variables = request.variables
    if variables.get("wake_reason") == "finish":
        outputs = json.loads(variables.get("outputs_json", "{}"))
        summary = "\n".join(f"{step}: {text}" for step, text in outputs.items()) or "No step produced output."
        return _calls(request, [("finalize", {"summary": summary})])
    calls: list[tuple[str, dict[str, Any]]] = []
    for message in json.loads(variables.get("inbox_json", "[]")):
        addressed = ADDRESSED.match(message["content"])
        if addressed and addressed.group(1) != message["from"]:
            target, text = addressed.groups()
            calls.append(("forward_to_agent", {"target_step_id": target, "text": text.strip()}))
        else:
            calls.append(("narrate", {"text": f"{message['from']} says: {message['content']}"}))
    if not calls:
        return _answer("nothing to do", request)
    return _calls(request, calls)


def _workflow_handler_policy(request: CompletionRequest) -> Completion:
    """A COORDINATOR_SELECTION for ``$command``: the catalog entry whose name and
    triggers the command mentions most; a tie, or no mention, asks which one."""
    variables = request.variables
    command = variables.get("command", "")
    catalog: list[dict[str, Any]] = json.loads(variables.get("catalog_json") or "[]")
    scores = [_mention_score(entry, command) for entry in catalog]
    best = max(scores, default=0)
    winners = [entry for entry, score in zip(catalog, scores, strict=True) if best and score == best]
    selection: dict[str, Any] = {
        "_type": "COORDINATOR_SELECTION",
        "command_received": command,
        "workflow_selected": None,
        "workflow_args": {},
    }
    if len(winners) == 1:
        entry = winners[0]
        selection["workflow_selected"] = entry["name"]
        selection["workflow_args"] = _command_args(command, entry.get("inputs", {}))
        if entry.get("mode") == "code" and variables.get("mode") != "code":
            selection["status"] = "blocked"
            selection["error"] = f"{entry['name']} workflow requires code mode - currently in chat mode"
        else:
            selection["status"] = "selected"
    else:
        selection["status"] = "needs_clarification"
        selection["message"] = "Which workflow do you mean?"
        selection["clarification_options"] = [
            {"interpretation": entry.get("description") or entry["name"], "would_select": entry["name"]}
            for entry in winners or catalog[:5]
        ]
    return _answer(json.dumps(selection), request)


def _mention_score(entry: dict[str, Any], command: str) -> int:
    # Naming the workflow outweighs any number of trigger words.
    name = entry["name"]
    named = any(_mentions(command, n) for n in {name, name.replace("_", " ").replace("-", " ")})
    return sum(1 for trigger in entry.get("triggers", []) if _mentions(command, trigger)) + (100 if named else 0)


def _mentions(text: str, phrase: str) -> bool:
    words = phrase.split()
    if not words:
        return False
    pattern = r"\s+".join(re.escape(word) for word in words)
    return re.search(rf"(?<!\w){pattern}(?!\w)", text, re.I) is not None


_ARG_VALUE = r"\s*[=:]\s*(?:\"([^\"]*)\"|'([^']*)'|([^\s,;]+))"
# "regions eu,us": a declared input's name, a space, and a value that is no
# word of the sentence around it ("deploy regions to eu" names no value).
_SPACED_VALUE = r"\s+(?!(?:a|an|the|to|of|in|on|for|about|with|and|or|is|are)\b)(?:\"([^\"]*)\"|'([^']*)'|([^\s;]+))"
_FREE_TEXT_INPUTS = ("query", "topic", "subject")


def _command_args(command: str, inputs: dict[str, Any]) -> dict[str, str]:
    """``name=value``, ``name: value`` and ``name value`` pairs for declared
    inputs, and the text after " for " or " about " for the input that takes
    free text. Values stay strings: the handler types them."""
    args: dict[str, str] = {}
    rest = command
    for name in inputs:
        pair = re.search(rf"(?<![\w-]){re.escape(name)}{_ARG_VALUE}", command, re.I) or re.search(
            rf"(?<![\w-]){re.escape(name)}{_SPACED_VALUE}", command, re.I
        )
        if pair:
            args[name] = next(group for group in pair.groups() if group is not None)
            rest = rest.replace(pair.group(0), " ")
    strings = [name for name, spec in inputs.items() if spec.get("type", "string") == "string"]
    free = next((name for name in strings if name in _FREE_TEXT_INPUTS), None)
    required = [name for name in strings if inputs[name].get("required")]
    if free is None and len(required) == 1:
        free = required[0]
    tail = re.search(r"\s(?:for|about)\s+(.*)$", rest, re.I | re.S)
    if free is not None and free not in args and tail:
        text = " ".join(tail.group(1).split()).strip("\"'“”‘’ ")
        if text:
            args[free] = text
    return args


def _calls(request: CompletionRequest, calls: list[tuple[str, dict[str, Any]]]) -> Completion:
    turn = sum(1 for m in request.messages if m.get("role") == "assistant") + 1
    requests = [
        ToolCallRequest(id=f"call-{request.agent}-{turn}-{n + 1}", name=name, arguments=json.dumps(args))
        for n, (name, args) in enumerate(calls)
    ]
    return Completion(content=None, tool_calls=requests, usage=_usage(request, calls=requests))


def _answer(text: str, request: CompletionRequest) -> Completion:
    return Completion(content=text, usage=_usage(request, content=text))


def _usage(request: CompletionRequest, *, content: str | None = None, calls: Sequence[ToolCallRequest] = ()) -> Usage:
    """What a real model would have been billed: the prompt is the request's
    messages and tool schemas, the completion the answer's text and calls,
    counted with the model's encoding (``agents.llm.tokens``)."""
    model = request.model
    prompt = tokens.count_messages(request.messages, model) + tokens.count_tools(request.tools, model)
    completion = tokens.count_text(content or "", model)
    completion += sum(tokens.count_call(call.name, call.arguments, model) for call in calls)
    return Usage(prompt_tokens=prompt, completion_tokens=completion)


def _fill(value: Any, variables: dict[str, str]) -> Any:
    if isinstance(value, str):
        return Template(value).safe_substitute(variables)
    if isinstance(value, dict):
        return {k: _fill(v, variables) for k, v in value.items()}
    if isinstance(value, list):
        return [_fill(v, variables) for v in value]
    return value


def _first_line(request: CompletionRequest) -> str:
    for message in request.messages:
        if message.get("role") == "user":
            lines = str(message.get("content") or "").strip().splitlines()
            return lines[0][:200] if lines else ""
    return ""
