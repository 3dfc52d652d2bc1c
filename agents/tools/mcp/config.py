"""How an MCP server is configured: a stdio command or a streamable-HTTP URL.

Servers are the operator's: ``ZENWEB_MCP_SERVERS`` (settings) configures
them, and a workflow's ``mcp:`` only names them. Secrets stay out of stored
configs: ``${VAR}`` in a command, argument, environment value, URL or header
is replaced from ``os.environ`` only when zenweb connects (``expanded``).
An HTTP server's address must be public, or listed by the operator in
``ZENWEB_MCP_ALLOWED_ADDRESSES`` (``address_refusal``): a URL that resolves
to loopback, a private range or the cloud metadata address is refused.
"""

from __future__ import annotations

import hashlib
import ipaddress
import json
import os
import re
import socket
from collections.abc import Mapping
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, model_validator
from pydantic.alias_generators import to_camel

# Server names become toolset names and the prefix of model-facing tool names
# (``<server>__<tool>``), so they may not contain the separator themselves.
SERVER_NAME_PATTERN = r"^[a-z][a-z0-9-]*(_[a-z0-9-]+)*$"
MAX_SERVER_NAME = 32
SEPARATOR = "__"
DEFAULT_CALL_TIMEOUT = 30.0
DEFAULT_START_TIMEOUT = 20.0

ServerName = Annotated[str, StringConstraints(pattern=SERVER_NAME_PATTERN, max_length=MAX_SERVER_NAME)]

_VARIABLE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
MIN_REDACTED = 4  # characters: see McpServerConfig.redact


class McpConfigError(ValueError):
    """A server configuration that cannot be used (bad JSON, a missing variable)."""


class McpServerConfig(BaseModel):
    """One MCP server. Exactly one of ``command`` (stdio: the server runs as a
    child process) or ``url`` (streamable HTTP) is given. ``timeout`` bounds
    each tool call, ``startTimeout`` the connection and handshake; ``tools``,
    when given, is the allow-list of the server's tools zenweb offers."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True, alias_generator=to_camel, frozen=True)

    name: ServerName = Field(default="server", description="set from the mapping key")
    command: str | None = Field(default=None, min_length=1)
    args: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)
    cwd: str | None = None
    url: str | None = Field(default=None, pattern=r"^https?://")
    headers: dict[str, str] = Field(default_factory=dict)
    timeout: float = Field(default=DEFAULT_CALL_TIMEOUT, gt=0, le=3600, description="seconds per tool call")
    start_timeout: float = Field(default=DEFAULT_START_TIMEOUT, gt=0, le=600, description="seconds to connect")
    tools: list[str] | None = Field(default=None, description="offer only these tools of the server")
    # A stdio server runs sandboxed (agents.sandbox) with no network unless this says so.
    network: bool = Field(default=False, description="a stdio server may reach the network")

    @model_validator(mode="after")
    def _one_transport(self) -> McpServerConfig:
        if (self.command is None) == (self.url is None):
            raise ValueError("an MCP server needs exactly one of 'command' (stdio) or 'url' (streamable HTTP)")
        if self.url is not None and (self.args or self.env or self.cwd):
            raise ValueError("'args', 'env' and 'cwd' are for a stdio server ('command'), not a 'url'")
        if self.command is not None and self.headers:
            raise ValueError("'headers' are for an HTTP server ('url'), not a 'command'")
        return self

    @property
    def transport(self) -> Literal["stdio", "http"]:
        return "stdio" if self.command is not None else "http"

    @property
    def fingerprint(self) -> str:
        """Identifies the configuration (placeholders, not secrets): two
        workflows declaring the same server share one connection."""
        text = json.dumps(self.model_dump(mode="json"), sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def target(self) -> str:
        """What the catalog page shows: the command line or the URL, unexpanded."""
        if self.command is not None:
            return " ".join([self.command, *self.args])
        return self.url or ""

    def expanded(self, environ: Mapping[str, str] | None = None) -> McpServerConfig:
        """This config with ``${VAR}`` replaced from the environment; raises
        McpConfigError naming (only) a variable that is not set."""
        environ = os.environ if environ is None else environ

        def sub(text: str) -> str:
            def one(match: re.Match[str]) -> str:
                name = match.group(1)
                if name not in environ:
                    raise McpConfigError(f"MCP server {self.name!r}: environment variable {name} is not set")
                return environ[name]

            return _VARIABLE.sub(one, text)

        return self.model_copy(
            update={
                "command": sub(self.command) if self.command is not None else None,
                "args": [sub(arg) for arg in self.args],
                "env": {key: sub(value) for key, value in self.env.items()},
                "cwd": sub(self.cwd) if self.cwd is not None else None,
                "url": sub(self.url) if self.url is not None else None,
                "headers": {key: sub(value) for key, value in self.headers.items()},
            }
        )

    def variables(self) -> set[str]:
        """The names of the ``${VAR}`` this config uses: the operator's
        secrets for the server (a token in a header, a URL with a key)."""
        texts = [self.command or "", *self.args, *self.env.values(), self.cwd or "", self.url or ""]
        return {name for value in [*texts, *self.headers.values()] for name in _VARIABLE.findall(value)}

    def redact(self, text: str, environ: Mapping[str, str] | None = None) -> str:
        """``text`` with the value of each ``${VAR}`` this config uses put
        back as its placeholder. A server's error output, its JSON-RPC error
        messages and HTTP errors can echo a secret zenweb substituted (a bad
        token, a URL with a key), and they are stored and shown as reasons.
        Values under 4 characters are left alone: replacing every "1" or
        "on" would garble the reason, and they are not secrets."""
        environ = os.environ if environ is None else environ
        values = sorted(
            ((environ[name], name) for name in self.variables() if len(environ.get(name, "")) >= MIN_REDACTED),
            key=lambda pair: -len(pair[0]),  # a value inside a longer one goes second
        )
        for value, name in values:
            text = text.replace(value, f"${{{name}}}")
        return text


ALLOWED_ADDRESSES = "ZENWEB_MCP_ALLOWED_ADDRESSES"


def address_refusal(url: str, environ: Mapping[str, str] | None = None) -> str | None:
    """Why zenweb will not connect to ``url``, or None. Every address its
    host resolves to must be global (not loopback, private, link-local,
    shared or reserved) unless ``ZENWEB_MCP_ALLOWED_ADDRESSES`` (comma-separated
    addresses, networks or host names) lists it. The check is of the
    addresses at connect time; a name that later resolves elsewhere (DNS
    rebinding) is not caught here."""
    environ = os.environ if environ is None else environ
    host = (urlsplit(url).hostname or "").lower()
    if not host:
        return f"{url!r} names no host"
    networks, names = _allowed(environ.get(ALLOWED_ADDRESSES, ""))
    if host in names:
        return None
    try:
        infos = socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP)
    except OSError as exc:
        return f"cannot resolve {host}: {exc}"
    for info in infos:
        address = ipaddress.ip_address(str(info[4][0]).split("%")[0])
        if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
            address = address.ipv4_mapped
        if not address.is_global and not any(address in network for network in networks):
            return (
                f"{host} resolves to {address}, a loopback, private or reserved address: "
                f"the operator may allow it in {ALLOWED_ADDRESSES}"
            )
    return None


def _allowed(text: str) -> tuple[list[ipaddress.IPv4Network | ipaddress.IPv6Network], set[str]]:
    networks, names = [], set()
    for entry in (part.strip() for part in text.split(",")):
        if not entry:
            continue
        try:
            networks.append(ipaddress.ip_network(entry, strict=False))
        except ValueError:
            names.add(entry.lower())
    return networks, names


def server_of(tool_name: str) -> str | None:
    """The server a model-facing MCP tool name (``<server>__<tool>``) names, or None."""
    server, separator, rest = tool_name.partition(SEPARATOR)
    return server if separator and server and rest else None


def server_configs(data: Any, source: str = "ZENWEB_MCP_SERVERS") -> dict[str, McpServerConfig]:
    """Servers from already-loaded JSON/YAML data: a mapping of name to
    config, or a list of configs that each carry a ``name``. Raises
    McpConfigError saying which server is wrong and why."""
    if data in (None, "", {}, []):
        return {}
    if isinstance(data, list):
        items = []
        for n, entry in enumerate(data):
            if not isinstance(entry, dict) or "name" not in entry:
                raise McpConfigError(f"{source}[{n}]: each server in a list needs a 'name'")
            items.append((str(entry["name"]), {k: v for k, v in entry.items() if k != "name"}))
    elif isinstance(data, dict):
        items = list(data.items())
    else:
        raise McpConfigError(f"{source}: expected a mapping of server name to config, or a list")
    servers: dict[str, McpServerConfig] = {}
    for name, entry in items:
        if not isinstance(entry, dict):
            raise McpConfigError(f"{source}.{name}: a server config is a mapping")
        try:
            servers[name] = McpServerConfig.model_validate({**entry, "name": name})
        except ValueError as exc:
            raise McpConfigError(f"{source}.{name}: {_first_error(exc)}") from None
    return servers


def load_server_configs(environ: Mapping[str, str] | None = None) -> dict[str, McpServerConfig]:
    """The servers of ``ZENWEB_MCP_SERVERS`` (JSON) or, if that is not set,
    of the JSON or YAML file named by ``ZENWEB_MCP_SERVERS_FILE``."""
    environ = os.environ if environ is None else environ
    raw = environ.get("ZENWEB_MCP_SERVERS", "").strip()
    path = environ.get("ZENWEB_MCP_SERVERS_FILE", "").strip()
    if raw:
        try:
            data = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise McpConfigError(f"ZENWEB_MCP_SERVERS is not valid JSON: {exc}") from None
        return server_configs(data)
    if path:
        import yaml

        try:
            with open(path, encoding="utf-8") as handle:
                data = yaml.safe_load(handle)
        except OSError as exc:
            raise McpConfigError(f"ZENWEB_MCP_SERVERS_FILE {path!r} cannot be read: {exc.strerror or exc}") from None
        except yaml.YAMLError as exc:
            raise McpConfigError(f"ZENWEB_MCP_SERVERS_FILE {path!r} is not valid JSON or YAML: {exc}") from None
        if isinstance(data, dict) and set(data) == {"servers"}:
            data = data["servers"]
        return server_configs(data, path)
    return {}


def _first_error(exc: ValueError) -> str:
    errors = getattr(exc, "errors", None)
    if callable(errors):
        first = errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        message = first["msg"].removeprefix("Value error, ")
        return f"{where}: {message}" if where else message
    return str(exc)
