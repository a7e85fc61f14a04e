"""The built-in tools: read_file, write_file, list_dir and run_bash, confined to the workspace.

Each is a thin adapter: the confinement and the file operations are ``workspace.files``, the
command runner is ``workspace.bash``; here they get their schemas, their declared effects
(reads are ``pure``, a write of given content is ``idempotent``, a command is ``external``)
and the words a model reads back. The workspace modules are called through their module,
not bound at import, so a test can stand in for one of them.
"""

from __future__ import annotations

import re
from typing import Any

from ..workspace import bash, files
from .definition import Tool, ToolContext, ToolResult

__all__ = ["builtin_tools"]


def builtin_tools(
    *,
    bash_timeout: float = 60,
    output_limit: int = 20_000,
    approve_bash: str | None = None,
    bash_max_timeout: float = 600,
) -> list[Tool]:
    """read_file, write_file, list_dir and run_bash, confined to the context's workspace.

    ``bash_timeout`` is run_bash's default timeout in seconds; the model may ask for up to
    ``bash_max_timeout`` (at least the default). ``output_limit`` caps each result in characters.
    ``approve_bash`` is a regex: commands it matches (``re.search``) need a person's approval first.
    """
    max_timeout = max(bash_timeout, bash_max_timeout)
    rule = re.compile(approve_bash) if approve_bash else None
    path_field = {"type": "string", "description": "A path relative to the workspace root, such as 'src/app.py'."}

    def read_file(inp: dict[str, Any], ctx: ToolContext) -> str:
        return files.read_text(ctx.workspace, inp["path"], limit=output_limit, redactor=ctx.redactor)

    def write_file(inp: dict[str, Any], ctx: ToolContext) -> str:
        return files.write_text(ctx.workspace, inp["path"], inp["content"])

    def list_dir(inp: dict[str, Any], ctx: ToolContext) -> str:
        return files.list_entries(ctx.workspace, inp.get("path", "."), limit=output_limit)

    def run_bash(inp: dict[str, Any], ctx: ToolContext) -> ToolResult:
        timeout = float(inp.get("timeout", bash_timeout))
        done = bash.run_command(
            inp["command"], cwd=ctx.workspace, env=dict(ctx.env), timeout=timeout, output_limit=output_limit,
            redactor=ctx.redactor, stop=ctx.stop,
        )
        out = done.output if done.output.endswith("\n") or not done.output else done.output + "\n"
        if done.timed_out:
            return ToolResult(
                f"{out}[timed out after {timeout:g}s: the command and every process it started were stopped; "
                f"pass a larger timeout (at most {max_timeout:g}) or make the command faster]",
                True,
            )
        status = done.exit_status
        if status is None:
            return ToolResult(f"{out}[stopped from outside before it finished (signal to its supervisor); its effects are unknown]", True)
        ending = f"exit status {status}" if status >= 0 else f"killed by signal {-status}"
        if done.leftovers:
            ending += f"; {done.leftovers} background process(es) still running at the end were stopped"
        return ToolResult(f"{out}[{ending}]")

    def bash_approval(inp: dict[str, Any]) -> str | None:
        command = inp.get("command") if isinstance(inp, dict) else None  # the loop may ask before validating
        if rule is None or not isinstance(command, str):
            return None
        m = rule.search(command)
        return f"the command matches the approval rule {rule.pattern!r} (at {m.group(0)!r})" if m else None

    return [
        Tool(
            "list_dir",
            f"List a folder of the workspace: one entry per line, sorted, folders ending in '/', symlinks as "
            f"'name -> target'. Up to {output_limit} characters.",
            {
                "type": "object",
                "properties": {"path": {"type": "string", "description": "A folder relative to the workspace root ('.', the default).", "default": "."}},
                "additionalProperties": False,
            },
            "pure",
            list_dir,
            strict=True,
        ),
        Tool(
            "read_file",
            f"Read a UTF-8 text file of the workspace. Shows at most {output_limit} characters and says so when "
            "it cuts; read further with run_bash (sed -n, grep). Binary files are refused.",
            {"type": "object", "properties": {"path": path_field}, "required": ["path"], "additionalProperties": False},
            "pure",
            read_file,
            strict=True,
        ),
        Tool(
            "run_bash",
            f"Run a bash command with the workspace as the working folder; stdout and stderr come back interleaved, "
            f"with the exit status. It is stopped after `timeout` seconds (default {bash_timeout:g}, at most "
            f"{max_timeout:g}); every process it starts ends with it (background processes do not outlive the "
            f"command). There is no stdin: prompts read end-of-file. Output over {output_limit} characters keeps "
            "its head and tail.",
            {
                "type": "object",
                "properties": {
                    "command": {"type": "string", "description": "The bash command (run with bash -c)."},
                    "timeout": {"type": "number", "exclusiveMinimum": 0, "maximum": max_timeout, "default": bash_timeout,
                                "description": f"Seconds before the command is stopped (default {bash_timeout:g}, at most {max_timeout:g})."},
                },
                "required": ["command"],
                "additionalProperties": False,
            },
            "external",
            run_bash,
            needs_approval=bash_approval if rule is not None else None,
            strict=True,
        ),
        Tool(
            "write_file",
            "Create or overwrite a workspace file with exactly `content` (UTF-8), creating parent folders. "
            "Writing the same content again changes nothing.",
            {
                "type": "object",
                "properties": {"path": path_field, "content": {"type": "string", "description": "The whole new text of the file."}},
                "required": ["path", "content"],
                "additionalProperties": False,
            },
            "idempotent",
            write_file,
            strict=True,
        ),
    ]
