"""The tool registry, @tool, and the built-ins, run through the registry as the agent loop does."""

from __future__ import annotations

import json
import os
import random
import shutil
import stat
import tempfile
import time
from pathlib import Path
from typing import Annotated, Any, Literal, Optional

import pytest

from nb_durable.agent.secrets import Redactor
from nb_durable.agent.tools import (
    Tool,
    ToolContext,
    ToolRegistry,
    ToolResult,
    builtin_tools,
    schema_errors,
    tool,
)
from nb_durable.agent.workspace.names import shown_name
from nb_durable.errors import ToolError
from tests.agent.test_sandbox import living
from tests.conftest import as_nobody

KEY = "sk-ant-api03-" + "Zq9" * 12


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    return root


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    d = tmp_path / "outside"
    d.mkdir()
    (d / "secret.txt").write_text("outside data\n")
    return d


@pytest.fixture
def ctx(ws: Path) -> ToolContext:
    return ToolContext.for_step(ws, "run-1", "tool:1:0:toolu_1")


@pytest.fixture
def reg() -> ToolRegistry:
    return ToolRegistry(builtin_tools(bash_timeout=10, output_limit=2000, approve_bash=r"git\s+push|rm\s+-rf"))


def run(reg: ToolRegistry, ctx: ToolContext, name: str, **tool_input: Any) -> ToolResult:
    result = reg.run(name, tool_input, ctx)
    json.dumps(result.to_json())  # a result always crosses the log as JSON
    return result


# --- results and contexts --------------------------------------------------------------------


def test_tool_result_json_round_trip() -> None:
    r = ToolResult("text", is_error=True)
    assert r.to_json() == {"content": "text", "is_error": True}
    assert ToolResult.from_json(r.to_json()) == r
    assert ToolResult.from_json({"content": "x"}) == ToolResult("x", False)
    with pytest.raises(ValueError, match="content"):
        ToolResult.from_json({"content": 3})


def test_context_for_step_resolves_and_keys(tmp_path: Path) -> None:
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    c = ToolContext.for_step(tmp_path / "link", "r", "tool:0:0:x", env={"A": "b"})
    assert c.workspace == (tmp_path / "real").resolve()
    assert c.key == "r:tool:0:0:x"
    assert c.env == {"A": "b"}


def test_context_repr_hides_the_environment(tmp_path: Path) -> None:
    c = ToolContext.for_step(tmp_path, "r", "s", env={"ANTHROPIC_API_KEY": KEY})
    assert KEY not in repr(c)


# --- @tool: schemas from type hints ----------------------------------------------------------


def test_schema_from_type_hints_and_docstring() -> None:
    @tool
    def search(
        query: str,
        limit: int = 10,
        scale: float = 1.0,
        exact: bool = False,
        kind: Literal["code", "docs"] = "code",
        tags: list[str] | None = None,
        weights: dict[str, float] | None = None,
        note: Annotated[str, "Shown to the model."] = "",
        maybe: Optional[int] = None,  # noqa: UP045 - the old spelling must work too
        context: ToolContext | None = None,
    ) -> str:
        """Search the index.

        A second paragraph the model does not need.

        Args:
            query: What to look for,
                in plain words.
            limit (int): At most this many hits.
        """
        return ""

    assert isinstance(search, Tool)
    assert search.schema() == {
        "name": "search",
        "description": "Search the index.",
        "input_schema": {
            "type": "object",
            "properties": {
                "query": {"type": "string", "description": "What to look for, in plain words."},
                "limit": {"type": "integer", "description": "At most this many hits.", "default": 10},
                "scale": {"type": "number", "default": 1.0},
                "exact": {"type": "boolean", "default": False},
                "kind": {"type": "string", "enum": ["code", "docs"], "default": "code"},
                "tags": {"type": "array", "items": {"type": "string"}},
                "weights": {"type": "object", "additionalProperties": {"type": "number"}},
                "note": {"type": "string", "description": "Shown to the model.", "default": ""},
                "maybe": {"type": "integer"},
            },
            "required": ["query"],
            "additionalProperties": False,
        },
    }
    assert search.effect == "external"  # the safe default


def test_decorator_options_and_sphinx_params() -> None:
    @tool(name="add-numbers", effect="pure", description="Add two numbers.")
    def add(a: int, b: Annotated[int, "The second."], c: int | str = 0) -> str:
        """Ignored summary.

        :param a: The first.
        """
        return str(a + b)

    assert add.name == "add-numbers" and add.effect == "pure" and add.description == "Add two numbers."
    props = add.input_schema["properties"]
    assert props["a"] == {"type": "integer", "description": "The first."}
    assert props["b"] == {"type": "integer", "description": "The second."}
    assert props["c"] == {"anyOf": [{"type": "integer"}, {"type": "string"}], "default": 0}
    assert add.input_schema["required"] == ["a", "b"]


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ("def f(x): ...", "no type hint"),
        ("def f(x: set[int]): ...", "has no JSON schema"),
        ("def f(*xs: int): ...", "ordinary named parameter"),
        ("def f(**kw: int): ...", "ordinary named parameter"),
        ("def f(x: dict[int, str]): ...", "keys are strings"),
    ],
)
def test_unusable_signatures_fail_at_decoration(source: str, message: str) -> None:
    namespace: dict[str, Any] = {}
    exec(source, namespace)
    with pytest.raises(TypeError, match=message):
        tool(namespace["f"])


def test_bad_names_and_effects_are_refused() -> None:
    def f() -> str:
        return ""

    with pytest.raises(ValueError, match="tool name"):
        tool(name="has space")(f)
    with pytest.raises(ValueError, match="effect"):
        tool(effect="sometimes")(f)  # type: ignore[call-overload]


def test_context_is_injected_not_shown(ctx: ToolContext) -> None:
    seen: list[ToolContext] = []

    @tool(effect="pure")
    def whoami(context: ToolContext) -> str:
        """Say which step this is."""
        seen.append(context)
        return context.key

    assert whoami.input_schema["properties"] == {}
    assert ToolRegistry([whoami]).run("whoami", {}, ctx) == ToolResult("run-1:tool:1:0:toolu_1")
    assert seen[0].workspace == ctx.workspace and seen[0].redactor is not None


# --- validation ------------------------------------------------------------------------------

SCHEMA = {
    "type": "object",
    "properties": {
        "n": {"type": "integer", "minimum": 1, "maximum": 5},
        "x": {"type": "number", "exclusiveMinimum": 0},
        "flag": {"type": "boolean"},
        "mode": {"enum": ["a", "b"]},
        "items": {"type": "array", "items": {"type": "string"}},
        "name": {"type": "string", "minLength": 2},
    },
    "required": ["n"],
    "additionalProperties": False,
}


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ({"n": 3}, None),
        ({"n": 3, "x": 2, "flag": False, "mode": "a", "items": ["p"], "name": "ok"}, None),
        ({}, "input: missing required field 'n'"),
        ({"n": "3"}, 'input.n: expected an integer, got string "3"'),
        ({"n": True}, "input.n: expected an integer, got boolean true"),
        ({"n": 2.5}, "input.n: expected an integer, got number 2.5"),
        ({"n": 9}, "input.n: 9 is above the maximum 5"),
        ({"n": 0}, "input.n: 0 is below the minimum 1"),
        ({"n": 1, "x": 0}, "input.x: 0 is not above 0"),
        ({"n": 1, "x": True}, "input.x: expected a number, got boolean true"),
        ({"n": 1, "flag": 1}, "input.flag: expected a boolean, got integer 1"),
        ({"n": 1, "mode": "c"}, 'input.mode: string "c" is not one of the allowed values: "a", "b"'),
        ({"n": 1, "items": ["p", 3]}, "input.items[1]: expected a string, got integer 3"),
        ({"n": 1, "items": "p"}, 'input.items: expected an array, got string "p"'),
        ({"n": 1, "name": "x"}, "input.name: must have at least 2 characters, got 1"),
        ({"n": 1, "extra": 0}, "input: unexpected field 'extra' (the fields are: flag, items, mode, n, name, x)"),
        (["n"], 'input: expected an object, got array ["n"]'),
    ],
)
def test_validation_messages_say_which_field_and_why(value: Any, message: str | None) -> None:
    errors = schema_errors(value, SCHEMA)
    assert errors == ([] if message is None else [message])


def test_enum_does_not_confuse_true_with_one() -> None:
    assert schema_errors(True, {"enum": [1, 2]})
    assert not schema_errors(1, {"enum": [1, 2]})


def test_invalid_input_becomes_an_error_result_listing_every_problem(reg: ToolRegistry, ctx: ToolContext) -> None:
    r = reg.run("write_file", {"path": 3, "contents": "x"}, ctx)
    assert r.is_error
    assert r.content == (
        "Invalid input for write_file: input: missing required field 'content'; "
        "input.path: expected a string, got integer 3; input: unexpected field 'contents' "
        "(the fields are: content, path). Fix the input and call write_file again."
    )
    assert reg.run("read_file", "a.txt", ctx).content.startswith("Invalid input for read_file: input: expected an object")


# --- the registry ----------------------------------------------------------------------------


def test_unknown_tool_lists_the_available_ones(reg: ToolRegistry, ctx: ToolContext) -> None:
    r = reg.run("delete_everything", {}, ctx)
    assert r == ToolResult(
        "There is no tool named 'delete_everything'. The available tools are: list_dir, read_file, run_bash, write_file.", True
    )
    assert reg.effect_of("delete_everything") == "pure"


def test_declared_effects(reg: ToolRegistry) -> None:
    assert {t.name: reg.effect_of(t.name) for t in reg} == {
        "list_dir": "pure", "read_file": "pure", "run_bash": "external", "write_file": "idempotent",
    }  # fmt: skip


def test_schemas_are_sorted_and_deterministic() -> None:
    a = ToolRegistry(builtin_tools())
    b = ToolRegistry(reversed(builtin_tools()))
    assert a.schemas() == b.schemas()
    assert [s["name"] for s in a.schemas()] == ["list_dir", "read_file", "run_bash", "write_file"]
    assert json.dumps(a.schemas(), sort_keys=True) == json.dumps(b.schemas(), sort_keys=True)
    a.schemas()[0]["input_schema"]["properties"].clear()
    assert a.schemas() == b.schemas()  # callers cannot change a tool through its schema


def test_registering(ctx: ToolContext) -> None:
    reg = ToolRegistry()

    @reg.tool(effect="pure")
    def ping() -> str:
        """Answer pong."""
        return "pong"

    @reg.tool
    def echo(text: str) -> str:
        """Echo text."""
        return text

    assert "ping" in reg and "echo" in reg and len(reg) == 2
    assert reg.get("ping") is ping and reg.get("nope") is None
    assert [t.name for t in reg] == ["echo", "ping"]
    assert reg.run("echo", {"text": "hi"}, ctx) == ToolResult("hi")
    with pytest.raises(ValueError, match="already registered"):
        reg.add(ping)
    with pytest.raises(TypeError, match="expected a Tool"):
        reg.add(lambda: "")  # type: ignore[arg-type]


def test_exceptions_become_error_results(ctx: ToolContext) -> None:
    reg = ToolRegistry()

    @reg.tool
    def boom(kind: str) -> str:
        """Fail."""
        if kind == "value":
            raise ValueError("bad value, try 2")
        if kind == "tool":
            raise ToolError("not like that")
        if kind == "exit":
            raise SystemExit(3)
        raise KeyboardInterrupt

    assert reg.run("boom", {"kind": "value"}, ctx) == ToolResult("boom failed: ValueError: bad value, try 2", True)
    assert reg.run("boom", {"kind": "tool"}, ctx) == ToolResult("boom failed: ToolError: not like that", True)
    assert reg.run("boom", {"kind": "exit"}, ctx) == ToolResult("boom failed: SystemExit: 3", True)
    with pytest.raises(KeyboardInterrupt):  # a person's interrupt is not the tool's problem
        reg.run("boom", {"kind": "interrupt"}, ctx)


def test_return_values(ctx: ToolContext) -> None:
    reg = ToolRegistry()
    reg.add(Tool("data", "", {"type": "object"}, "pure", lambda i, c: {"a": [1, 2]}))  # type: ignore[arg-type,return-value]
    reg.add(Tool("nothing", "", {"type": "object"}, "pure", lambda i, c: None))  # type: ignore[arg-type,return-value]
    reg.add(Tool("empty", "", {"type": "object"}, "pure", lambda i, c: ""))
    reg.add(Tool("odd", "", {"type": "object"}, "pure", lambda i, c: object()))  # type: ignore[arg-type,return-value]
    reg.add(Tool("flagged", "", {"type": "object"}, "pure", lambda i, c: ToolResult("no such user", True)))
    assert reg.run("data", {}, ctx) == ToolResult('{"a": [1, 2]}')
    assert reg.run("nothing", {}, ctx) == ToolResult("(no output)")
    assert reg.run("empty", None, ctx) == ToolResult("(no output)")
    assert reg.run("odd", {}, ctx).is_error
    assert reg.run("flagged", {}, ctx) == ToolResult("no such user", True)


def test_tool_input_is_not_mutated(ctx: ToolContext) -> None:
    reg = ToolRegistry()

    @reg.tool
    def grab(items: list[str]) -> str:
        """Mutate its input."""
        items.append("changed")
        return "ok"

    recorded = {"items": ["a"]}
    reg.run("grab", recorded, ctx)
    assert recorded == {"items": ["a"]}


def test_registry_caps_every_result(ctx: ToolContext) -> None:
    reg = ToolRegistry(output_limit=100)
    reg.add(Tool("big", "", {"type": "object"}, "pure", lambda i, c: "x" * 1000))
    r = reg.run("big", {}, ctx)
    assert r.content.startswith("x" * 100 + "\n[... 900 more characters cut")
    assert len(r.content) < 200


def test_needs_approval(reg: ToolRegistry) -> None:
    assert reg.needs_approval("run_bash", {"command": "git push origin main"}) == (
        r"the command matches the approval rule 'git\\s+push|rm\\s+-rf' (at 'git push')"
    )
    assert reg.needs_approval("run_bash", {"command": "git status"}) is None
    assert reg.needs_approval("run_bash", {"command": 5}) is None  # invalid input: run will refuse it
    assert reg.needs_approval("read_file", {"path": "x"}) is None
    assert ToolRegistry(builtin_tools()).get("run_bash").needs_approval is None  # type: ignore[union-attr]

    def broken(inp: dict[str, Any]) -> str | None:
        raise RuntimeError("oops")

    shaky = ToolRegistry([Tool("t", "", {"type": "object"}, "external", lambda i, c: "", needs_approval=broken)])
    assert "approval rule of t failed (RuntimeError: oops)" in (shaky.needs_approval("t", {}) or "")


def test_check_guard_results_are_redacted(ctx: ToolContext) -> None:
    def sent(inp: dict[str, Any], context: ToolContext) -> ToolResult | None:
        return ToolResult(f"already sent with {KEY}") if inp.get("id") == "done" else None

    reg = ToolRegistry([Tool("send", "", {"type": "object"}, "external", lambda i, c: "", check=sent)], redactor=Redactor({"ANTHROPIC_API_KEY": KEY}))
    assert reg.check("send", {"id": "done"}, ctx) == ToolResult("already sent with [REDACTED:ANTHROPIC_API_KEY]")
    assert reg.check("send", {"id": "new"}, ctx) is None
    assert reg.check("nope", {}, ctx) is None


# --- secrets ---------------------------------------------------------------------------------


@pytest.fixture
def secret_env(monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    monkeypatch.setenv("MY_SECRET_TOKEN", "tok-visible-nowhere-42")
    return {"ANTHROPIC_API_KEY": KEY, "MY_SECRET_TOKEN": "tok-visible-nowhere-42"}


def test_bash_never_sees_credential_variables(reg: ToolRegistry, ws: Path, secret_env: dict[str, str]) -> None:
    ctx = ToolContext.for_step(ws, "r", "s")  # env: os.environ, secrets included
    out = run(reg, ctx, "run_bash", command='env; echo "token=$MY_SECRET_TOKEN"').content
    assert "token=\n" in out
    assert "ANTHROPIC_API_KEY" not in out and "MY_SECRET_TOKEN" not in out
    assert f"PATH={os.environ['PATH']}" in out
    for value in secret_env.values():
        assert value not in out


def test_a_variable_passed_through_is_seen_and_still_masked(ws: Path, secret_env: dict[str, str]) -> None:
    reg = ToolRegistry(builtin_tools(), pass_env=["MY_SECRET_TOKEN"])
    ctx = ToolContext.for_step(ws, "r", "s")
    out = run(reg, ctx, "run_bash", command='echo "token=$MY_SECRET_TOKEN key=$ANTHROPIC_API_KEY"').content
    assert out == "token=[REDACTED:MY_SECRET_TOKEN] key=\n[exit status 0]"


@pytest.mark.parametrize("pass_env", ["MY_SECRET_TOKEN", "MY_SECRET_TOKEN OTHER_TOKEN", ("MY_SECRET_TOKEN OTHER_TOKEN",)])
def test_variables_passed_through_as_one_string_are_named_not_spelled(
    ws: Path, secret_env: dict[str, str], monkeypatch: pytest.MonkeyPatch, pass_env: object
) -> None:
    """``pass_env="MY_SECRET_TOKEN"`` passed variables named M, Y, _, S, ...: a str is iterable,
    so the one meant was never seen; names in one str are read as $NB_DURABLE_PASS_ENV is."""
    monkeypatch.setenv("OTHER_TOKEN", "other-secret-value")
    reg = ToolRegistry(builtin_tools(), pass_env=pass_env)  # type: ignore[arg-type]
    ctx = ToolContext.for_step(ws, "r", "s")
    out = run(reg, ctx, "run_bash", command='echo "token=$MY_SECRET_TOKEN other=$OTHER_TOKEN"').content
    other = "[REDACTED:OTHER_TOKEN]" if " " in str(pass_env) else ""
    assert out == f"token=[REDACTED:MY_SECRET_TOKEN] other={other}\n[exit status 0]"


def test_secrets_only_in_the_context_env_are_redacted_too(ws: Path) -> None:
    reg = ToolRegistry(builtin_tools(), pass_env=["DEPLOY_PASSWORD"])
    ctx = ToolContext.for_step(ws, "r", "s", env={"PATH": os.environ["PATH"], "DEPLOY_PASSWORD": "correct-horse-battery"})
    assert run(reg, ctx, "run_bash", command="echo $DEPLOY_PASSWORD").content == "[REDACTED:DEPLOY_PASSWORD]\n[exit status 0]"


def test_read_file_with_the_key_is_redacted(reg: ToolRegistry, ctx: ToolContext, ws: Path, secret_env: dict[str, str]) -> None:
    (ws / ".env").write_text(f"ANTHROPIC_API_KEY={KEY}\n")
    assert run(reg, ctx, "read_file", path=".env").content == "ANTHROPIC_API_KEY=[REDACTED:ANTHROPIC_API_KEY]\n"


def test_a_cut_never_exposes_part_of_a_secret(ctx: ToolContext, ws: Path, secret_env: dict[str, str]) -> None:
    reg = ToolRegistry(builtin_tools(output_limit=100))
    (ws / "big.txt").write_text("x" * 95 + KEY + "y" * 500)
    r = run(reg, ctx, "read_file", path="big.txt")
    assert "[read_file: showing the first" in r.content
    assert KEY[:4] not in r.content


def test_error_messages_are_redacted(ctx: ToolContext, secret_env: dict[str, str]) -> None:
    reg = ToolRegistry()

    @reg.tool
    def login() -> str:
        """Fail loudly."""
        raise PermissionError(f"rejected key {KEY}")

    assert reg.run("login", {}, ctx) == ToolResult("login failed: PermissionError: rejected key [REDACTED:ANTHROPIC_API_KEY]", True)
    assert KEY not in reg.run("read_file", {"path": KEY}, ctx).content


# --- read_file -------------------------------------------------------------------------------


def test_read_file(reg: ToolRegistry, ctx: ToolContext, ws: Path) -> None:
    (ws / "src").mkdir()
    (ws / "src" / "app.py").write_text("print('héllo')\n")
    assert run(reg, ctx, "read_file", path="src/app.py") == ToolResult("print('héllo')\n")


def test_read_file_caps_with_a_note(reg: ToolRegistry, ctx: ToolContext, ws: Path) -> None:
    (ws / "long.txt").write_text("".join(f"line {i}\n" for i in range(5000)))
    r = run(reg, ctx, "read_file", path="long.txt")
    assert not r.is_error
    body, note = r.content.rsplit("\n[read_file: ", 1)
    assert body.startswith("line 0\nline 1\n") and len(body) == 2000
    assert "showing the first 2000 characters" in note and "sed -n" in note


@pytest.mark.parametrize("size", [2001, 2100, 9000, 14000])
def test_a_file_a_little_over_the_cap_shows_the_whole_cap(reg: ToolRegistry, ctx: ToolContext, ws: Path, size: int) -> None:
    """A file read whole but longer than the cap went through the streaming redactor, which holds
    back as many characters as the longest secret format (some 12,000): a 9,000-character file
    showed 'the first 0 characters', a 14,000-character one 1,600 of the 2,000."""
    text = ("".join(f"line {i}\n" for i in range(size)))[:size]
    (ws / "f.txt").write_text(text)
    body, note = run(reg, ctx, "read_file", path="f.txt").content.rsplit("\n[read_file: ", 1)
    assert body == text[:2000] and note.startswith("showing the first 2000 characters")


@pytest.mark.parametrize("name", ["-n", "a;touch pwned", "my notes $(touch pwned).txt", "it's", os.fsdecode(b"caf\xe9\nx.txt")])
def test_the_commands_suggested_past_a_cut_name_the_file_as_one_word(reg: ToolRegistry, ctx: ToolContext, ws: Path, name: str) -> None:
    """The hints said `sed -n '...' NAME` and `ls NAME` with the name as it is: pasted, a name
    from an archive ran as a command, and one with a leading dash was read as an option."""
    folder = ws / name
    folder.mkdir()
    (folder / name).write_text("".join(f"line {i}\n" for i in range(1000)))
    for i in range(500):
        (folder / f"f{i:03d}").touch()
    shown = shown_name(name)
    note = run(reg, ctx, "read_file", path=f"{shown}/{shown}").content.rsplit("read further with run_bash, e.g. ", 1)[1]
    more = run(reg, ctx, "run_bash", command=note.removesuffix("]"))
    first = int(note.split("'")[1].split(",")[0])
    assert more.content.startswith(f"line {first - 1}\n") and more.content.endswith("[exit status 0]"), more
    hint = run(reg, ctx, "list_dir", path=shown).content.rsplit("e.g. ", 1)[1].removesuffix("]")
    assert run(reg, ctx, "run_bash", command=hint.replace("PATTERN", "f499")) == ToolResult("f499\n[exit status 0]")
    assert not (ws / "pwned").exists() and not (folder / "pwned").exists()


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda p: p.write_bytes(b"\x89PNG\r\n\x1a\n\0\0\0"), "binary file"),
        (lambda p: p.write_bytes(b"caf\xe9 latin-1"), "not UTF-8 text"),
        (lambda p: p.mkdir(), "is a folder"),
        (lambda p: None, "does not exist"),
        (os.mkfifo, "not a regular file"),
    ],
)
def test_read_file_refusals(reg: ToolRegistry, ctx: ToolContext, ws: Path, make: Any, message: str) -> None:
    make(ws / "thing")
    r = run(reg, ctx, "read_file", path="thing")
    assert r.is_error and message in r.content and r.content.startswith("read_file failed: ToolError: ")


def test_read_file_of_a_file_named_as_a_folder_is_refused(reg: ToolRegistry, ctx: ToolContext, ws: Path) -> None:
    (ws / "f.txt").write_text("a file")
    assert run(reg, ctx, "read_file", path="f.txt/") == ToolResult(
        "read_file failed: ToolError: 'f.txt/' ends with '/', which names a folder, but it is a file; drop the '/' to read it", True
    )


def test_read_file_refuses_a_hard_link_run_bash_made_to_a_file_outside(
    reg: ToolRegistry, ctx: ToolContext, ws: Path, outside: Path
) -> None:
    """A hard link passes every path check: read_file read the file outside through it."""
    assert not run(reg, ctx, "run_bash", command=f"ln {outside / 'secret.txt'} x && ln x inner").is_error
    assert (ws / "x").stat().st_nlink == 3
    for name in ("x", "inner"):
        r = run(reg, ctx, "read_file", path=name)
        assert r.is_error and "outside data" not in r.content
        assert r.content == (
            f"read_file failed: WorkspaceError: {name!r} is a file with 3 names (hard links), and the others may be "
            "outside the workspace: read_file reads only files with one name. If it is meant to be read, copy it "
            "to a file of its own (cp, with run_bash) and read the copy"
        )
    assert not run(reg, ctx, "run_bash", command="cp x copy.txt").is_error  # as the message says
    assert run(reg, ctx, "read_file", path="copy.txt") == ToolResult("outside data\n")


def test_write_file_gives_a_hard_linked_name_a_file_of_its_own(reg: ToolRegistry, ctx: ToolContext, ws: Path, outside: Path) -> None:
    """It never writes through the link (the file outside keeps its bytes), and with the same
    bytes it does not leave the name linked (it compared them by reading the file outside)."""
    secret = outside / "secret.txt"
    for content in ("new text\n", "outside data\n"):
        os.link(secret, ws / "x")
        assert run(reg, ctx, "write_file", path="x", content=content) == ToolResult(f"Wrote x ({len(content)} bytes, 1 line)")
        assert (ws / "x").read_text() == content and secret.read_text() == "outside data\n"
        assert (ws / "x").stat().st_nlink == 1 and secret.stat().st_nlink == 1
        assert not run(reg, ctx, "read_file", path="x").is_error
        (ws / "x").unlink()


# --- write_file ------------------------------------------------------------------------------


def test_write_file_creates_parents_and_is_atomic(reg: ToolRegistry, ctx: ToolContext, ws: Path) -> None:
    r = run(reg, ctx, "write_file", path="a/b/c.txt", content="one\ntwo\n")
    assert r == ToolResult("Wrote a/b/c.txt (8 bytes, 2 lines)")
    assert (ws / "a" / "b" / "c.txt").read_text() == "one\ntwo\n"
    assert sorted(p.name for p in (ws / "a" / "b").iterdir()) == ["c.txt"]  # no temp file left


def test_write_file_same_bytes_is_left_alone(reg: ToolRegistry, ctx: ToolContext, ws: Path) -> None:
    run(reg, ctx, "write_file", path="f.txt", content="same")
    before = (ws / "f.txt").stat()
    time.sleep(0.01)
    r = run(reg, ctx, "write_file", path="f.txt", content="same")
    assert r == ToolResult("Wrote f.txt (4 bytes, 1 line)"), "a re-run reads exactly like the first run"
    after = (ws / "f.txt").stat()
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)


def test_a_write_killed_before_its_rename_leaves_a_temp_file_its_rerun_removes(
    reg: ToolRegistry, ctx: ToolContext, ws: Path
) -> None:
    (ws / ".f.txt.nb-durable-write.tmp").write_text("half a write from a killed process")
    assert run(reg, ctx, "write_file", path="f.txt", content="whole") == ToolResult("Wrote f.txt (5 bytes, 1 line)")
    assert sorted(p.name for p in ws.iterdir()) == ["f.txt"]
    assert (ws / "f.txt").read_text() == "whole"


def test_write_file_overwrites_keeping_the_mode(reg: ToolRegistry, ctx: ToolContext, ws: Path) -> None:
    script = ws / "run.sh"
    script.write_text("old")
    script.chmod(0o750)
    assert run(reg, ctx, "write_file", path="run.sh", content="new") == ToolResult("Wrote run.sh (3 bytes, 1 line)")
    assert script.read_text() == "new" and stat.S_IMODE(script.stat().st_mode) == 0o750


def test_write_file_through_an_inside_symlink_keeps_the_link(reg: ToolRegistry, ctx: ToolContext, ws: Path) -> None:
    (ws / "target.txt").write_text("old")
    (ws / "link.txt").symlink_to("target.txt")
    assert not run(reg, ctx, "write_file", path="link.txt", content="new").is_error
    assert (ws / "link.txt").is_symlink() and (ws / "target.txt").read_text() == "new"


@pytest.mark.parametrize(
    ("setup", "path", "message"),
    [
        (lambda ws: (ws / "d").mkdir(), "d", "is a folder"),
        (lambda ws: (ws / "f").write_text(""), "f/x.txt", "is a file, not a folder"),
        (lambda ws: None, ".", "the workspace folder itself"),
        (lambda ws: None, "new/", "'new/' ends with '/', which names a folder; write_file writes files: drop the '/', or name a file in it"),
        (lambda ws: (ws / "f").write_text(""), "f/", "'f/' ends with '/', which names a folder; write_file writes files"),
    ],
)
def test_write_file_refusals(reg: ToolRegistry, ctx: ToolContext, ws: Path, setup: Any, path: str, message: str) -> None:
    setup(ws)
    before = snapshot(ws)
    r = run(reg, ctx, "write_file", path=path, content="x")
    assert r.is_error and message in r.content
    assert snapshot(ws) == before  # a file named 'new' was made for 'new/'


# --- list_dir --------------------------------------------------------------------------------


def test_list_dir(reg: ToolRegistry, ctx: ToolContext, ws: Path) -> None:
    (ws / "b.txt").write_text("")
    (ws / "a_dir").mkdir()
    (ws / ".hidden").write_text("")
    (ws / "to_b").symlink_to("b.txt")
    assert run(reg, ctx, "list_dir") == ToolResult(".hidden\na_dir/\nb.txt\nto_b -> b.txt")
    assert run(reg, ctx, "list_dir", path="a_dir") == ToolResult("a_dir is an empty folder")
    assert run(reg, ctx, "list_dir", path="b.txt").is_error


def test_list_dir_marks_a_symlink_as_a_folder_only_inside(reg: ToolRegistry, ctx: ToolContext, ws: Path, outside: Path) -> None:
    """A link out was stat'ed to mark it 'out/': a look outside (a dead mount hangs it) for a
    folder list_dir then refuses to list."""
    (ws / "sub").mkdir()
    (ws / "in").symlink_to("sub")
    (ws / "out").symlink_to(outside)
    assert run(reg, ctx, "list_dir") == ToolResult(f"in/ -> sub\nout -> {outside}\nsub/")


def test_list_dir_caps_with_a_note(reg: ToolRegistry, ctx: ToolContext, ws: Path) -> None:
    for i in range(300):
        (ws / f"file_{i:04d}.txt").touch()
    r = run(reg, ctx, "list_dir", path=".")
    lines = r.content.splitlines()
    assert lines[0] == "file_0000.txt"
    assert lines[-1].startswith("[list_dir: showing ") and "of 300 entries" in lines[-1]
    assert len(r.content) <= 2000 + 200


def test_names_with_control_characters_are_one_line_each_and_open_as_listed(reg: ToolRegistry, ctx: ToolContext, ws: Path) -> None:
    """A name with a line break was listed as it is: one entry read as two that do not exist."""
    (ws / "a\nb.txt").write_text("one file\n")
    (ws / "t\tab").write_text("tab\n")
    (ws / "b.txt").write_text("")
    (ws / "to_ab").symlink_to("a\nb.txt")
    listed = run(reg, ctx, "list_dir").content
    assert listed.splitlines() == ["a\\x0ab.txt", "b.txt", "t\\x09ab", "to_ab -> a\\x0ab.txt"]
    assert run(reg, ctx, "read_file", path="a\\x0ab.txt") == ToolResult("one file\n")
    assert run(reg, ctx, "read_file", path="a\nb.txt") == ToolResult("one file\n")  # as JSON can also say it
    assert not run(reg, ctx, "write_file", path="t\\x09ab", content="new\n").is_error
    assert (ws / "t\tab").read_text() == "new\n" and not (ws / "t\\x09ab").exists()


def test_a_symlink_loop_is_listed_and_named(reg: ToolRegistry, ctx: ToolContext, ws: Path) -> None:
    """One loop (``ln -s a b; ln -s b a`` in run_bash) made list_dir fail for the whole folder,
    and read_file answer with a bare OSError naming the absolute path."""
    (ws / "a").symlink_to("b")
    (ws / "b").symlink_to("a")
    (ws / "f.txt").write_text("")
    assert run(reg, ctx, "list_dir") == ToolResult("a -> b\nb -> a\nf.txt")
    loop = (
        "{!r} is a loop of symlinks that never reaches a file or folder; list_dir shows where each points: "
        "remove or fix one with run_bash"
    )
    for name, tool_input in [("read_file", {}), ("list_dir", {}), ("write_file", {"content": "x"})]:
        for path in ("a", "a/inner.txt"):
            assert run(reg, ctx, name, path=path, **tool_input) == ToolResult(f"{name} failed: ToolError: {loop.format(path)}", True)
    assert os.readlink(ws / "a") == "b" and os.readlink(ws / "b") == "a"


def test_names_up_to_the_file_systems_limit_are_written_and_longer_ones_refused(
    reg: ToolRegistry, ctx: ToolContext, ws: Path
) -> None:
    """A legal name of 234 to 255 bytes could not be written (its temporary file's name was too
    long), and too long a name or path came back as a bare OSError naming the absolute path."""
    longest = "n" * os.pathconf(ws, "PC_NAME_MAX")
    for name in (longest, "é" * (len(longest) // 2), "sub/" + longest):
        content = f"{len(name)}\n"
        assert run(reg, ctx, "write_file", path=name, content=content) == ToolResult(f"Wrote {name} ({len(content)} bytes, 1 line)")
        assert run(reg, ctx, "read_file", path=name) == ToolResult(content)
        assert run(reg, ctx, "write_file", path=name, content="again\n") == ToolResult(f"Wrote {name} (6 bytes, 1 line)")
    assert sorted(p.name for p in ws.iterdir()) == sorted([longest, "é" * (len(longest) // 2), "sub"])  # no temp file left
    limits = f"(names of at most {len(longest)} bytes, whole paths under {os.pathconf(ws, 'PC_PATH_MAX')} bytes, the workspace's"
    deep = "/".join(["d" * 200] * 25) + "/f.txt"
    for path in (longest + "x", "é" * (len(longest) // 2 + 1), deep):
        for name, tool_input in [("read_file", {}), ("list_dir", {}), ("write_file", {"content": "x"})]:
            r = run(reg, ctx, name, path=path, **tool_input)
            assert r.is_error and r.content.startswith(f"{name} failed: ToolError: {path[:80]!r}... is too long a path for this file system")
            assert limits in r.content and r.content.endswith("use shorter names")
    assert not (ws / ("d" * 200)).exists()  # refused before any folder was made


def test_files_in_a_folder_that_can_be_passed_through_but_not_listed_are_read_and_written(reg: ToolRegistry) -> None:
    """A folder one may enter but not list (mode 300, a drop box): the walk through folder
    handles opened it to read, so read_file (as write_file before it) refused every file inside."""
    base = Path(tempfile.mkdtemp(dir="/tmp"))  # pytest's folders are root's alone: nobody could enter them
    try:
        base.chmod(0o755)
        box = base / "ws" / "box"
        box.mkdir(parents=True)
        (box / "note.txt").write_text("hello\n")
        for p in (base / "ws", box, box / "note.txt"):
            if os.geteuid() == 0:
                os.chown(p, 65534, 65534)
        box.chmod(0o300)
        ctx = ToolContext.for_step(base / "ws", "run-1", "tool:1:0:toolu_1")
        said = as_nobody(lambda: [
            reg.run("read_file", {"path": "box/note.txt"}, ctx).to_json(),
            reg.run("write_file", {"path": "box/new.txt", "content": "new\n"}, ctx).to_json(),
            reg.run("list_dir", {"path": "box"}, ctx).to_json(),
        ])  # fmt: skip
        assert said[:2] == [{"content": "hello\n", "is_error": False}, {"content": "Wrote box/new.txt (4 bytes, 1 line)", "is_error": False}]
        assert said[2]["is_error"] and "Permission denied" in said[2]["content"]  # listing it is what its mode forbids
        box.chmod(0o700)
        assert (box / "new.txt").read_text() == "new\n"
    finally:
        (base / "ws" / "box").chmod(0o700)
        shutil.rmtree(base)


# --- escapes: refused before any effect ------------------------------------------------------


def snapshot(*roots: Path) -> dict[str, bytes | None]:
    out: dict[str, bytes | None] = {}
    for root in roots:
        for p in sorted(root.rglob("*")):
            out[str(p)] = p.read_bytes() if p.is_file() and not p.is_symlink() else None
    return out


@pytest.mark.parametrize(
    "path",
    [
        "../escaped.txt",
        "../outside/secret.txt",
        "sub/../../escaped.txt",
        "../newdir/escaped.txt",
        "/tmp/escaped.txt",
        "out/secret.txt",
        "out/new.txt",
        "out/newdir/new.txt",
        "link_file",
        "dangling",
        "inner/up/secret.txt",
    ],
)
def test_escapes_are_refused_before_any_effect(reg: ToolRegistry, ctx: ToolContext, ws: Path, outside: Path, path: str) -> None:
    (ws / "out").symlink_to(outside)
    (ws / "link_file").symlink_to(outside / "secret.txt")
    (ws / "dangling").symlink_to(outside / "not_yet.txt")
    (ws / "inner").mkdir()
    (ws / "inner" / "up").symlink_to(outside)
    before = snapshot(ws.parent)
    for name, tool_input in [
        ("write_file", {"path": path, "content": "pwned"}),
        ("read_file", {"path": path}),
        ("list_dir", {"path": path}),
    ]:
        r = reg.run(name, tool_input, ctx)
        assert r.is_error, (name, path, r)
        assert "WorkspaceError" in r.content and "outside data" not in r.content
    assert snapshot(ws.parent) == before
    assert not Path("/tmp/escaped.txt").exists()


# --- run_bash --------------------------------------------------------------------------------


def test_run_bash_reports_output_and_status(reg: ToolRegistry, ctx: ToolContext, ws: Path) -> None:
    assert run(reg, ctx, "run_bash", command="echo hi > f.txt; cat f.txt; false") == ToolResult("hi\n[exit status 1]")
    assert (ws / "f.txt").read_text() == "hi\n"
    assert run(reg, ctx, "run_bash", command="true") == ToolResult("[exit status 0]")
    assert run(reg, ctx, "run_bash", command="printf x") == ToolResult("x\n[exit status 0]")


def test_run_bash_timeout_kills_the_tree(reg: ToolRegistry, ctx: ToolContext) -> None:
    d = f"96.{random.randrange(10**6):06d}"
    started = time.monotonic()
    r = run(reg, ctx, "run_bash", command=f"sleep {d} & sleep {d}", timeout=1)
    assert time.monotonic() - started < 5
    assert r.is_error and r.content.startswith("[timed out after 1s: the command and every process it started were stopped")
    assert living(f"sleep {d}") == []


def test_run_bash_timeout_bounds(ctx: ToolContext) -> None:
    reg = ToolRegistry(builtin_tools(bash_timeout=5, bash_max_timeout=20))
    props = reg.get("run_bash").input_schema["properties"]["timeout"]  # type: ignore[union-attr]
    assert (props["default"], props["maximum"]) == (5, 20)
    assert run(reg, ctx, "run_bash", command="true", timeout=21).content.startswith(
        "Invalid input for run_bash: input.timeout: 21 is above the maximum 20."
    )
    assert run(reg, ctx, "run_bash", command="true", timeout=0).is_error


def test_run_bash_caps_output(ctx: ToolContext) -> None:
    reg = ToolRegistry(builtin_tools(output_limit=300))
    r = run(reg, ctx, "run_bash", command="seq 1 100000")
    assert r.content.startswith("1\n2\n3\n") and r.content.endswith("99999\n100000\n[exit status 0]")
    assert "characters of output omitted" in r.content and len(r.content) < 500


def test_run_bash_reports_stopped_background_processes(reg: ToolRegistry, ctx: ToolContext) -> None:
    d = f"95.{random.randrange(10**6):06d}"
    r = run(reg, ctx, "run_bash", command=f"sleep {d} & echo bg")
    assert r.content == "bg\n[exit status 0; 1 background process(es) still running at the end were stopped]"
    assert living(f"sleep {d}") == []
