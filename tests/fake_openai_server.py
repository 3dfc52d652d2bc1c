"""A local server speaking just enough of the OpenAI chat-completions protocol for
tests that drive the real openai SDK without reaching a network.

    with FakeOpenAIServer() as server:
        server.push_text("hello")
        provider = OpenAIProvider(base_url=server.base_url, api_key="k", model="m")
        ...
        assert server.requests[0].body["model"] == "m"

Each POST /v1/chat/completions takes the next canned reply from a queue;
every request is recorded, whether or not a reply was queued. A request with
``"stream": true`` gets a 200 reply as server-sent events, the way OpenAI
streams: the content a few characters a chunk (``chunk_delay`` seconds
apart), each tool call's arguments in fragments, then the usage when
``stream_options.include_usage`` asks for it, then ``[DONE]``.
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self

COMPLETIONS_PATH = "/v1/chat/completions"


@dataclass(frozen=True)
class RecordedRequest:
    """One request as the server saw it. Header names are lower-cased."""

    method: str
    path: str
    headers: dict[str, str]
    body: Any


@dataclass(frozen=True)
class Delivery:
    """How an answer is sent: after waiting ``delay`` seconds, and once
    ``gate`` is set (a benchmark's clients connect first; None: at once)."""

    delay: float = 0.0
    gate: threading.Event | None = field(default=None, compare=False)
    # Streamed: the seconds between two chunks, and the characters of
    # content (or of tool-call arguments) in each.
    chunk_delay: float = 0.0
    chunk_chars: int = 4
    # Streamed, as some servers and proxies do it: the connection dropped
    # after this many chunks, mid-answer; the stream ended without "data: [DONE]".
    cut_after: int | None = None
    done: bool = True


@dataclass(frozen=True)
class CannedResponse:
    """What to answer one request with, and how it is sent."""

    status: int
    body: dict[str, Any]
    delivery: Delivery = Delivery()
    headers: dict[str, str] = field(default_factory=dict)
    # Streamed tool-call fragments without their "index", as Ollama sends them.
    tool_call_index: bool = True


class FakeOpenAIServer:
    """A ThreadingHTTPServer on a free 127.0.0.1 port; use it as a context manager."""

    def __init__(self) -> None:
        self.requests: list[RecordedRequest] = []
        # (time.time(), text) of each streamed chunk of content, as it was
        # written to the socket: when a token left the endpoint.
        self.streamed: list[tuple[float, str]] = []
        self._responses: deque[CannedResponse] = deque()
        self._lock = threading.Lock()
        # Set on stop, so a handler sleeping out a delay wakes up instead of
        # holding the test until the delay has passed.
        self._stopping = threading.Event()
        self._httpd = _HTTPServer(self)
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        return self._httpd.server_address[1]

    @property
    def base_url(self) -> str:
        """The ``base_url`` to give the SDK (it appends ``/chat/completions``)."""
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self) -> Self:
        self._thread = threading.Thread(
            target=self._httpd.serve_forever,
            kwargs={"poll_interval": 0.05},
            name="fake-openai-server",
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        self._httpd.shutdown()
        self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    # Canned responses, answered in the order they were pushed.

    def push(self, response: CannedResponse) -> None:
        with self._lock:
            self._responses.append(response)

    def push_text(
        self,
        content: str,
        *,
        prompt_tokens: int = 10,
        completion_tokens: int = 5,
        finish_reason: str | None = "stop",
        delivery: Delivery = Delivery(),
    ) -> None:
        """Answer with an assistant text message, sent as ``delivery`` says.
        ``finish_reason`` None: no chunk says why the answer stopped."""
        message = {"role": "assistant", "content": content}
        body = _completion(message, prompt_tokens, completion_tokens, finish_reason=finish_reason)
        self.push(CannedResponse(200, body, delivery))

    def push_tool_calls(
        self,
        calls: list[tuple[str, str, str]],
        *,
        content: str | None = None,
        prompt_tokens: int = 10,
        completion_tokens: int = 5,
        chunk_delay: float = 0.0,
        finish_reason: str = "tool_calls",
        tool_call_index: bool = True,
    ) -> None:
        """Answer with tool calls, each given as ``(id, name, arguments_json)``;
        ``tool_call_index`` False streams their fragments without an index."""
        message = {
            "role": "assistant",
            "content": content,
            "tool_calls": [
                {
                    "id": call_id,
                    "type": "function",
                    "function": {"name": name, "arguments": arguments},
                }
                for call_id, name, arguments in calls
            ],
        }
        body = _completion(message, prompt_tokens, completion_tokens, finish_reason=finish_reason)
        self.push(CannedResponse(200, body, Delivery(chunk_delay=chunk_delay), tool_call_index=tool_call_index))

    def push_error(
        self,
        status: int,
        message: str,
        *,
        error_type: str = "server_error",
        code: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        """Answer with an HTTP error status and an OpenAI-style error body.

        ``headers`` are sent as well: ``{"retry-after-ms": "10"}`` makes the SDK
        retry a 429 or 5xx after 10 ms instead of its half-second backoff."""
        body = {
            "error": {
                "message": message,
                "type": error_type,
                "param": None,
                "code": code,
            }
        }
        self.push(CannedResponse(status, body, headers=dict(headers or {})))

    def push_body(self, body: dict[str, Any], *, status: int = 200) -> None:
        """Answer with an arbitrary JSON body, e.g. a completion without choices."""
        self.push(CannedResponse(status, body))

    def _next_response(self) -> CannedResponse:
        with self._lock:
            if self._responses:
                return self._responses.popleft()
        return CannedResponse(
            500,
            {
                "error": {
                    "message": "fake server: no canned response queued",
                    "type": "test",
                }
            },
        )


def _completion(
    message: dict[str, Any],
    prompt_tokens: int,
    completion_tokens: int,
    *,
    finish_reason: str | None = "stop",
) -> dict[str, Any]:
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "created": 1_700_000_000,
        "model": "fake-model",
        "choices": [{"index": 0, "message": message, "finish_reason": finish_reason}],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
    }


def _chunks(response: CannedResponse, include_usage: bool) -> list[tuple[str, str]]:
    """A canned completion as the JSON of its stream's chunks, each with the
    content it carries."""
    body = response.body
    base = {key: body.get(key) for key in ("id", "created", "model")} | {"object": "chat.completion.chunk"}
    size = max(1, response.delivery.chunk_chars)

    def chunk(delta: dict[str, Any] | None, finish: str | None = None, **extra: Any) -> str:
        choices = [] if delta is None else [{"index": 0, "delta": delta, "finish_reason": finish}]
        return json.dumps(base | {"choices": choices} | extra)

    chunks: list[tuple[str, str]] = []
    for choice in body.get("choices") or []:
        message = choice.get("message") or {}
        chunks.append((chunk({"role": "assistant", "content": ""}), ""))
        content = message.get("content") or ""
        for start in range(0, len(content), size):
            piece = content[start : start + size]
            chunks.append((chunk({"content": piece}), piece))
        for index, call in enumerate(message.get("tool_calls") or []):
            function = call["function"]
            numbered = {"index": index} if response.tool_call_index else {}
            head = numbered | {"id": call["id"], "type": "function", "function": {"name": function["name"]}}
            chunks.append((chunk({"tool_calls": [head | {"function": head["function"] | {"arguments": ""}}]}), ""))
            arguments = function.get("arguments") or ""
            for start in range(0, len(arguments), size):
                fragment = numbered | {"function": {"arguments": arguments[start : start + size]}}
                chunks.append((chunk({"tool_calls": [fragment]}), ""))
        if choice.get("finish_reason") is not None:
            chunks.append((chunk({}, choice["finish_reason"]), ""))
    if not body.get("choices"):
        chunks.append((chunk(None), ""))
    if include_usage and body.get("usage") is not None:
        chunks.append((chunk(None, usage=body["usage"]), ""))
    if response.delivery.done:
        chunks.append(("[DONE]", ""))
    return chunks


class _HTTPServer(ThreadingHTTPServer):
    """The HTTP server of a FakeOpenAIServer (``fake``), on a free port."""

    daemon_threads = True

    def __init__(self, fake: FakeOpenAIServer) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.fake = fake


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _HTTPServer

    def handle(self) -> None:
        # A client that drops its kept-alive connection (a worker that
        # exits) is no error worth a traceback.
        try:
            super().handle()
        except ConnectionResetError:
            pass

    def do_POST(self) -> None:
        fake = self.server.fake
        body = self._record()
        if self.path.split("?", 1)[0] != COMPLETIONS_PATH:
            error = {"message": f"fake server: no route for {self.path}", "type": "test"}
            self._send(CannedResponse(404, {"error": error}))
            return
        response = fake._next_response()
        if not self._wait(response.delivery):
            return
        if response.status == 200 and isinstance(body, dict) and body.get("stream"):
            usage = bool((body.get("stream_options") or {}).get("include_usage"))
            self._stream(response, usage)
            return
        self._send(response)

    def _record(self) -> Any:
        """Read the request's body (its JSON, else its text) and record the request."""
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length)
        try:
            body: Any = json.loads(raw) if raw else None
        except ValueError:
            body = raw.decode("utf-8", "replace")
        headers = {name.lower(): value for name, value in self.headers.items()}
        self.server.fake.requests.append(RecordedRequest(method="POST", path=self.path, headers=headers, body=body))
        return body

    def _wait(self, delivery: Delivery) -> bool:
        """Wait out the delivery's delay and gate; False if the server stopped meanwhile."""
        stopping = self.server.fake._stopping
        if delivery.delay and stopping.wait(delivery.delay):
            return False
        while delivery.gate is not None and not delivery.gate.wait(0.05):
            if stopping.is_set():
                return False
        return True

    def _stream(self, response: CannedResponse, include_usage: bool) -> None:
        delivery, fake = response.delivery, self.server.fake
        try:
            self._head(200, "text/event-stream", response.headers, {"Transfer-Encoding": "chunked"})
            for index, (chunk, content) in enumerate(_chunks(response, include_usage)):
                if index and delivery.chunk_delay and fake._stopping.wait(delivery.chunk_delay):
                    return
                if index == delivery.cut_after:
                    # No last chunk of the chunked body: the client reads an incomplete one.
                    self.close_connection = True
                    return
                data = f"data: {chunk}\n\n".encode()
                self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
                self.wfile.flush()
                if content:
                    fake.streamed.append((time.time(), content))
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            pass

    def _send(self, response: CannedResponse) -> None:
        payload = json.dumps(response.body).encode()
        try:
            self._head(response.status, "application/json", response.headers, {"Content-Length": str(len(payload))})
            self.wfile.write(payload)
        except (BrokenPipeError, ConnectionResetError):
            # The client gave up first (a timeout test): nothing to answer.
            pass

    def _head(self, status: int, content_type: str, canned: dict[str, str], framing: dict[str, str]) -> None:
        """The status line and headers: the content type, the body's framing, then the canned headers."""
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        for name, value in [*framing.items(), *canned.items()]:
            self.send_header(name, value)
        self.end_headers()

    def log_message(self, fmt: str, *args: Any) -> None:
        pass
