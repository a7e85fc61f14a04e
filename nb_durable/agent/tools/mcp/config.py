"""MCP server configuration in the format people already have: ``mcpServers`` JSON.

Claude Desktop, Claude Code (``.mcp.json``) and Cursor write ``{"mcpServers": {name: server}}``;
VS Code writes ``{"servers": {name: server}}``. Both are read. A server is stdio (``command``,
``args``, ``env``, ``cwd``) or streamable HTTP (``url``, ``headers``; ``"type": "http"``).
``${VAR}`` and ``${VAR:-default}`` in any string are taken from the environment when the
server starts, as Claude Code does. Keys of our own, all optional: ``timeout`` (seconds a call
may take, default 60), ``startupTimeout`` (seconds to connect, default 30), ``trusted``
(``true``: the server's tool annotations decide effects; by default they do not, and every
tool is external, as the MCP specification asks of clients), and ``tools``:
``{"tool name": {"effect": "pure" | "idempotent" | "external", "approve": true}}`` to set a
tool's effect whatever the server says, or to make a person approve each call.

Invariant: the values of ``env`` and ``headers`` never leave this module except into the
server's process or request: ``record()`` keeps their names only, and a config rebuilt from a
record asks the environment for them by name (``${NAME}``).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, cast

from ....core.events import EFFECTS, Effect
from ....errors import McpConfigError
from ...models.base import public_url
from ...secrets.redaction import Redactor

__all__ = [
    "DEFAULT_CALL_TIMEOUT",
    "DEFAULT_STARTUP_TIMEOUT",
    "McpConfig",
    "McpServerConfig",
    "ToolOverride",
    "load_mcp_config",
]

DEFAULT_CALL_TIMEOUT = 60.0
DEFAULT_STARTUP_TIMEOUT = 30.0
_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")
_AUTH_SCHEME = re.compile(r"(?i)(?:basic|bearer|bot|digest|dpop|negotiate|oauth|token)\s+(?P<credential>\S+)")
"""A value in the shape of an HTTP ``Authorization`` header: ``Bearer <credential>``."""
_KNOWN = {"type", "command", "args", "env", "cwd", "url", "headers", "timeout", "startupTimeout", "tools", "disabled", "trusted"}
Transport = Literal["stdio", "http"]


@dataclass(frozen=True, slots=True)
class ToolOverride:
    """What the config says about one tool, over its annotations."""

    effect: Effect | None = None
    approve: bool = False

    def to_json(self) -> dict[str, Any]:
        return {"effect": self.effect, "approve": self.approve}


@dataclass(frozen=True)
class McpServerConfig:
    """One server as configured; strings are kept as written (``${VAR}`` unexpanded)."""

    name: str
    transport: Transport
    command: str = ""
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict, repr=False)
    cwd: str | None = None
    url: str = ""
    headers: Mapping[str, str] = field(default_factory=dict, repr=False)
    timeout: float = DEFAULT_CALL_TIMEOUT
    startup_timeout: float = DEFAULT_STARTUP_TIMEOUT
    tools: Mapping[str, ToolOverride] = field(default_factory=dict)
    trusted: bool = False
    """Whether the server's tool annotations decide effects (``readOnlyHint``: pure, ...)."""

    def expand(self, text: str, environ: Mapping[str, str]) -> str:
        """``text`` with ``${VAR}`` taken from ``environ``; McpConfigError naming an unset one."""

        def value(m: re.Match[str]) -> str:
            name, default = m.group(1), m.group(2)
            if name in environ:
                return environ[name]
            if default is not None:
                return default
            raise McpConfigError(
                f"MCP server {self.name!r} needs the environment variable {name}, which is not set. "
                "Set it (values of env and headers are never recorded, only their names), or pass "
                "the config file that holds it."
            )

        return _VAR.sub(value, text)

    def check_variables(self, environ: Mapping[str, str]) -> None:
        """McpConfigError naming a variable that any string of the server needs and nobody set."""
        for text in (self.command, *self.args, self.cwd or "", self.url, *self.env.values(), *self.headers.values()):
            self.expand(text, environ)

    def resolved_env(self, environ: Mapping[str, str]) -> dict[str, str]:
        """The server's ``env`` with variables expanded."""
        return {k: self.expand(v, environ) for k, v in self.env.items()}

    def resolved_headers(self, environ: Mapping[str, str]) -> dict[str, str]:
        """The server's ``headers`` with variables expanded."""
        return {k: self.expand(v, environ) for k, v in self.headers.items()}

    def secrets(self, environ: Mapping[str, str]) -> Redactor:
        """A redactor for every value of ``env`` and ``headers`` (whatever their names)."""
        return Redactor(self.secret_values(environ))

    def secret_values(self, environ: Mapping[str, str]) -> list[tuple[str, str]]:
        """(label, value) of every value of ``env`` and ``headers`` that is set."""
        pairs: list[tuple[str, str]] = []
        for label, values in (("env", self.env), ("header", self.headers)):
            for k, raw in values.items():
                try:
                    value = self.expand(raw, environ)
                except McpConfigError:
                    continue  # not set: nothing to leak
                # A value is one secret, spaces and all: a word of it ("--verbose") may be
                # anywhere else. The credential of "Bearer abc..." is a secret alone too.
                scheme = _AUTH_SCHEME.fullmatch(value.strip())
                parts = (value,) if scheme is None else (value, scheme["credential"])
                pairs.extend((f"{self.name}.{label}.{k}", part) for part in parts)
        return pairs

    def record(self, redactor: Redactor | None = None) -> dict[str, Any]:
        """The server as a run records it: names of env variables and headers, never values."""
        clean = redactor or Redactor()
        out: dict[str, Any] = {"name": self.name, "transport": self.transport}
        if self.transport == "stdio":
            out.update(command=clean.redact(self.command), args=[clean.redact(a) for a in self.args])
            out.update(env=sorted(self.env), cwd=self.cwd)
        else:
            # A key written into the URL is in no variable: the endpoint URL's rule hides it.
            out.update(url=public_url(clean.redact(self.url), kept=_VAR.fullmatch), headers=sorted(self.headers))
        out.update(timeout=self.timeout, startup_timeout=self.startup_timeout, trusted=self.trusted)
        if self.tools:
            out["tools"] = {name: o.to_json() for name, o in sorted(self.tools.items())}
        return out

    @classmethod
    def from_record(cls, data: Mapping[str, Any]) -> McpServerConfig:
        """A server rebuilt from its record; each env variable and header comes from the
        environment variable of the same name (``${NAME}``) when it starts."""
        env = {k: f"${{{k}}}" for k in data.get("env") or ()}
        headers = {k: f"${{{_env_name(k)}}}" for k in data.get("headers") or ()}
        return _server(str(data["name"]), {**data, "type": data.get("transport"), "env": env, "headers": headers}, None)


def _env_name(header: str) -> str:
    return re.sub(r"[^A-Za-z0-9_]", "_", header).upper()


@dataclass(frozen=True)
class McpConfig:
    """The servers of one config, and the file it came from (None for a dict)."""

    servers: tuple[McpServerConfig, ...]
    path: str | None = None

    def server(self, name: str) -> McpServerConfig:
        for s in self.servers:
            if s.name == name:
                return s
        known = ", ".join(s.name for s in self.servers) or "none"
        raise McpConfigError(f"the MCP config has no server named {name!r} (it has: {known})")

    def secrets(self, environ: Mapping[str, str] | None = None) -> Redactor:
        """A redactor for every env and header value of every server."""
        env = os.environ if environ is None else environ
        out = Redactor.from_environ(env)
        for s in self.servers:
            out = out.merged(s.secrets(env))
        return out


def _fail(where: str, what: str) -> McpConfigError:
    return McpConfigError(f"{where}: {what}")


def _strings(where: str, value: Any, kind: str) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, Mapping) or not all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
        raise _fail(where, f"{kind} must be an object of strings, such as {{\"NAME\": \"value\"}}")
    return dict(value)


def _seconds(where: str, value: Any, default: float) -> float:
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
        raise _fail(where, f"a timeout is a positive number of seconds, not {value!r}")
    return float(value)


def _overrides(where: str, value: Any) -> dict[str, ToolOverride]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise _fail(where, 'tools must be an object: {"tool name": {"effect": "pure", "approve": true}}')
    out: dict[str, ToolOverride] = {}
    for name, spec in value.items():
        if not isinstance(spec, Mapping) or set(spec) - {"effect", "approve"}:
            raise _fail(f"{where}, tool {name!r}", 'an override is {"effect": "pure" | "idempotent" | "external", "approve": true}')
        effect = spec.get("effect")
        if effect is not None and effect not in EFFECTS:
            raise _fail(f"{where}, tool {name!r}", f"effect must be 'pure', 'idempotent' or 'external', not {effect!r}")
        out[str(name)] = ToolOverride(cast("Effect | None", effect), bool(spec.get("approve", False)))
    return out


def _server(name: str, spec: Any, base: Path | None) -> McpServerConfig:
    where = f"MCP server {name!r}"
    if not isinstance(spec, Mapping):
        raise _fail(where, "each server is an object with a command (stdio) or a url (HTTP)")
    unknown = sorted(set(spec) - _KNOWN - {"transport", "startup_timeout", "name"})
    if unknown:
        raise _fail(where, f"unknown keys {', '.join(unknown)} (known: {', '.join(sorted(_KNOWN))})")
    kind = spec.get("type")
    if kind in ("sse",):
        raise _fail(where, "the SSE transport is not supported; use streamable HTTP (\"type\": \"http\") or stdio")
    transport: Transport = "http" if kind in ("http", "streamable-http", "streamableHttp") or (kind is None and "url" in spec) else "stdio"
    if kind not in (None, "stdio", "http", "streamable-http", "streamableHttp"):
        raise _fail(where, f"type must be 'stdio' or 'http', not {kind!r}")
    timeout = _seconds(where, spec.get("timeout"), DEFAULT_CALL_TIMEOUT)
    startup = _seconds(where, spec.get("startupTimeout", spec.get("startup_timeout")), DEFAULT_STARTUP_TIMEOUT)
    tools = _overrides(where, spec.get("tools"))
    trusted = spec.get("trusted", False)
    if not isinstance(trusted, bool):
        raise _fail(where, f'trusted is true or false (whether its tool annotations decide effects), not {trusted!r}')
    if transport == "http":
        url = spec.get("url")
        if not isinstance(url, str) or not url:
            raise _fail(where, "an HTTP server needs a url, such as \"http://127.0.0.1:8000/mcp\"")
        return McpServerConfig(name, "http", url=url, headers=_strings(where, spec.get("headers"), "headers"),
                               timeout=timeout, startup_timeout=startup, tools=tools, trusted=trusted)  # fmt: skip
    command = spec.get("command")
    if not isinstance(command, str) or not command:
        raise _fail(where, "a stdio server needs a command (and args), such as \"command\": \"python\"")
    args = spec.get("args") or []
    if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
        raise _fail(where, "args must be a list of strings")
    cwd = spec.get("cwd")
    if cwd is not None and not isinstance(cwd, str):
        raise _fail(where, "cwd must be a string")
    if cwd is not None and base is not None and not _VAR.search(cwd) and not os.path.isabs(cwd):
        cwd = str((base / cwd).resolve())
    return McpServerConfig(name, "stdio", command=command, args=tuple(args), env=_strings(where, spec.get("env"), "env"),
                           cwd=cwd, timeout=timeout, startup_timeout=startup, tools=tools, trusted=trusted)  # fmt: skip


def load_mcp_config(source: str | os.PathLike[str] | Mapping[str, Any] | McpConfig) -> McpConfig:
    """Read an ``mcpServers`` config from a JSON file or a dict; McpConfigError says what is wrong."""
    if isinstance(source, McpConfig):
        return source
    path: str | None = None
    base: Path | None = None
    if isinstance(source, Mapping):
        data: Any = source
    else:
        file = Path(source).expanduser()
        path, base = str(file.resolve()), file.resolve().parent
        try:
            data = json.loads(file.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise McpConfigError(f"no MCP config at {file}: write one with \"mcpServers\", as Claude Desktop does") from None
        except (OSError, UnicodeDecodeError) as e:
            raise McpConfigError(f"cannot read the MCP config {file}: {e}") from None
        except json.JSONDecodeError as e:
            raise McpConfigError(f"the MCP config {file} is not JSON: {e}") from None
    where = path or "the MCP config"
    if not isinstance(data, Mapping):
        raise _fail(where, 'expected an object such as {"mcpServers": {"name": {"command": "..."}}}')
    servers = data.get("mcpServers", data.get("servers"))
    if not isinstance(servers, Mapping):
        raise _fail(where, 'expected "mcpServers" (or VS Code\'s "servers"): an object of servers by name')
    out = []
    for name, spec in servers.items():
        if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z0-9_.-]{1,64}", name):
            raise _fail(where, f"a server name is 1-64 letters, digits, '_', '.' or '-', not {name!r}")
        disabled = spec.get("disabled", False) if isinstance(spec, Mapping) else False
        if not isinstance(disabled, bool):  # "disabled": "true" started the server it meant to leave out
            raise _fail(f"MCP server {name!r}", f"disabled is true or false, not {disabled!r}")
        if disabled:
            continue
        out.append(_server(name, spec, base))
    return McpConfig(tuple(out), path)

