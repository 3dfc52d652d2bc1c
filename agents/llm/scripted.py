"""A deterministic, offline provider. It drives the demo and the tests.

A step agent plays the ``script`` its workflow YAML gives it, one entry per
model turn (the turn is the number of assistant messages already in the
conversation, so any worker can pick up where another stopped). Without a
script a step answers once with a fixed sentence. The coordinator, unless it
has a script, follows a rule policy: a message that starts with ``for <step>:``
or ``@<step>:`` is forwarded to that step, any other message is narrated, and
when every step has finished it finalizes with their outputs. The workflow
handler (``agents.handler``), unless it has a script, picks a workflow by the
triggers and names the command mentions and reads its inputs from the
command's words, asking when they are unclear (``agents.llm.scripted_handler``).
"""

from __future__ import annotations

import json
import re
import shlex
import time
from collections.abc import Sequence
from string import Template
from typing import TYPE_CHECKING, Any

from agents.llm import scripted_handler, tokens
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
        script = _of_attempt(self.script, request.variables.get("step.attempt", "1"))
        if script and turn < len(script):
            return self._play(request, script[turn], turn)
        if request.agent == "coordinator":
            return _coordinator_policy(request)
        if request.agent == "workflow_handler" and not self.script:
            return _workflow_handler_policy(request)
        if script:
            raise ProviderError(
                f"scripted provider: the script of agent {request.agent!r} has "
                f"{len(script)} turns and turn {turn + 1} was asked for"
            )
        return _answer(f"{request.agent} finished: {_first_line(request)}", request)

    def _play(self, request: CompletionRequest, entry: ScriptTurn, turn: int) -> Completion:
        if entry.delay:
            time.sleep(entry.delay)
        # ``$tool_result``: what the last tool call of the conversation returned.
        variables = {**request.variables, "tool_result": _last_tool_result(request)}
        if entry.fail is not None:
            raise ProviderError(_fill(entry.fail, variables))
        if entry.calls:
            calls = [
                ToolCallRequest(
                    id=f"call-{request.agent}-{turn + 1}-{n + 1}",
                    name=call.tool,
                    arguments=json.dumps(render_call(call.tool, call.args, variables)),
                )
                for n, call in enumerate(entry.calls)
            ]
            return Completion(content=None, tool_calls=calls, usage=_usage(request, calls=calls))
        return _answer(_fill(entry.say or "", variables), request)


def _last_tool_result(request: CompletionRequest) -> str:
    results = [m for m in request.messages if m.get("role") == "tool"]
    return str(results[-1].get("content") or "") if results else ""


def _of_attempt(script: list[ScriptTurn], attempt: str) -> list[ScriptTurn]:
    """The turns of ``script`` played in ``attempt`` of its step (1 the first)."""
    if all(entry.attempt is None for entry in script):
        return script
    return [entry for entry in script if entry.attempt is None or str(entry.attempt) == attempt]


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
    """A COORDINATOR_SELECTION for ``$command``, read from its words
    (``agents.llm.scripted_handler``): never a guess."""
    variables = request.variables
    catalog: list[dict[str, Any]] = json.loads(variables.get("catalog_json") or "[]")
    answer = scripted_handler.selection(
        variables.get("command", ""), catalog, variables.get("mode", "chat"), chosen=variables.get("chosen")
    )
    return _answer(json.dumps(answer), request)


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


# Tool arguments that bash runs as a command line: what a script
# substitutes into them is quoted for the shell.
SHELL_ARGUMENTS = {"run_shell": "command"}


def render_call(tool: str, args: dict[str, Any], variables: dict[str, str]) -> dict[str, Any]:
    """A script's tool call with ``$name`` substituted. Into a shell command
    every value goes quoted (shlex.quote), so an input such as ``x; rm -rf ~``
    or ``$(id)`` is one word, never more commands. Approvals render a
    workflow's calls with this same function, so what is shown is what runs."""
    rendered = {key: _fill(value, variables) for key, value in args.items()}
    shell = SHELL_ARGUMENTS.get(tool)
    if shell is not None and isinstance(args.get(shell), str):
        quoted = {name: shlex.quote(value) for name, value in variables.items()}
        rendered[shell] = Template(args[shell]).safe_substitute(quoted)
    return rendered


def placeholders(value: Any) -> set[str]:
    """The ``$name`` and ``${name}`` placeholders in a script value."""
    if isinstance(value, str):
        return {m.group("named") or m.group("braced") for m in Template.pattern.finditer(value)} - {None}
    if isinstance(value, dict):
        return set().union(*(placeholders(v) for v in value.values()))
    if isinstance(value, list):
        return set().union(*(placeholders(v) for v in value))
    return set()


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
