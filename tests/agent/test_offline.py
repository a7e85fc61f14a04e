"""ScriptedModel and DemoModel, driven the way the agent loop drives a model.

The demo is run by a small loop in this file that really performs its tool calls in a copy
of the demo workspace (files read and written, unittest run in a subprocess), so "the tests
pass at the end" is checked by running them, not by reading the model's claim.
"""

from __future__ import annotations

import copy
import json
import math
import re
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from anthropic.types import Message

from nb_durable.agent.models.demo import DEMO_TASK, DemoModel, prepare_demo_workspace
from nb_durable.agent.models.messages import api_error, make_message, text_message, tool_use_message
from nb_durable.agent.models.scripted import ScriptedModel, ScriptExhaustedError
from nb_durable.errors import ModelError, SettingError, TransientModelError
from tests.conftest import REPO, subprocess_env

TOOL_NAMES = ("list_dir", "read_file", "write_file", "run_bash")
TOOLS = [
    {"name": name, "description": f"the {name} tool", "input_schema": {"type": "object"}}
    for name in TOOL_NAMES
]
BUG, FIX = "ordered = list(values)", "ordered = sorted(values)"

Override = Callable[[str, dict[str, Any], int], "tuple[str, bool] | None"]


def assert_exact_message(message: dict[str, Any]) -> None:
    """The message is what the SDK's Message.model_dump(mode="json") gives, field for field."""
    assert Message.model_validate(message).model_dump(mode="json") == message


def run_tool(root: Path, name: str, args: dict[str, Any]) -> tuple[str, bool]:
    """The four built-in tools, minimally, inside ``root``."""
    try:
        if name == "list_dir":
            entries = sorted((root / args["path"]).iterdir())
            return "\n".join(e.name + ("/" if e.is_dir() else "") for e in entries), False
        if name == "read_file":
            return (root / args["path"]).read_text(), False
        if name == "write_file":
            (root / args["path"]).write_text(args["content"])
            return f"wrote {len(args['content'])} characters to {args['path']}", False
        if name == "run_bash":
            done = subprocess.run(
                args["command"],
                check=False,
                shell=True,
                cwd=root,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
                timeout=args.get("timeout", 60),
            )
            return f"{done.stdout}\n[exit status: {done.returncode}]", False
    except OSError as e:
        return f"{type(e).__name__}: {e}", True
    return f"unknown tool {name}", True


@dataclass
class Transcript:
    requests: list[dict[str, Any]] = field(default_factory=list)
    replies: list[dict[str, Any]] = field(default_factory=list)
    calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    messages: list[dict[str, Any]] = field(default_factory=list)
    streamed: list[list[str]] = field(default_factory=list)

    @property
    def final(self) -> dict[str, Any]:
        return self.replies[-1]["message"]

    @property
    def final_text(self) -> str:
        return "".join(b["text"] for b in self.final["content"] if b["type"] == "text")

    def names(self) -> list[str]:
        return [name for name, _ in self.calls]


def drive(
    model: Any,
    root: Path,
    *,
    task: str = DEMO_TASK,
    tools: list[dict[str, Any]] | None = TOOLS,
    override: Override | None = None,
    max_turns: int = 12,
) -> Transcript:
    """A minimal agent loop: call the model, perform its tool calls, feed the results back."""
    t = Transcript(messages=[{"role": "user", "content": task}])
    for _ in range(max_turns):
        request: dict[str, Any] = {
            "model": "claude-test-model",
            "max_tokens": 4096,
            "system": "You are a careful software engineer.",
            "messages": copy.deepcopy(t.messages),
        }
        if tools is not None:
            request["tools"] = tools
        pieces: list[str] = []
        reply = model.create(request, on_text=pieces.append)
        message = reply["message"]
        assert_exact_message(message)
        assert "".join(pieces) == "".join(b["text"] for b in message["content"] if b["type"] == "text")
        t.requests.append(request)
        t.replies.append(reply)
        t.streamed.append(pieces)
        t.messages.append(
            {
                "role": "assistant",
                "content": [{k: v for k, v in b.items() if v is not None} for b in message["content"]],
            }
        )
        if message["stop_reason"] != "tool_use":
            return t
        results = []
        for block in message["content"]:
            if block["type"] != "tool_use":
                continue
            name, args = block["name"], block["input"]
            nth = sum(1 for n, _ in t.calls if n == name)
            t.calls.append((name, args))
            outcome = override(name, args, nth) if override else None
            text, is_error = outcome if outcome is not None else run_tool(root, name, args)
            results.append(
                {"type": "tool_result", "tool_use_id": block["id"], "content": text, "is_error": is_error}
            )
        t.messages.append({"role": "user", "content": results})
    raise AssertionError(f"no end_turn within {max_turns} model calls")


def answer(tool: str, text: str, *, is_error: bool = True, nth: int | None = None) -> Override:
    """An override that answers the ``nth`` call of ``tool`` (every call if None) with ``text``."""

    def override(name: str, args: dict[str, Any], count: int) -> tuple[str, bool] | None:
        return (text, is_error) if name == tool and nth in (None, count) else None

    return override


def unittest_passes(root: Path) -> bool:
    done = subprocess.run(
        [sys.executable, "-m", "unittest"], cwd=root, capture_output=True, text=True, check=False
    )
    return done.returncode == 0


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    return prepare_demo_workspace(tmp_path / "demo")


def demo() -> DemoModel:
    return DemoModel(latency=0)


@pytest.fixture(scope="module")
def happy(tmp_path_factory: pytest.TempPathFactory) -> tuple[Transcript, Path, float]:
    """One uninterrupted demo run, shared by the tests that only read it (each run costs ~0.5 s)."""
    root = prepare_demo_workspace(tmp_path_factory.mktemp("happy") / "demo")
    start = time.perf_counter()
    t = drive(demo(), root)
    return t, root, time.perf_counter() - start


# --- message helpers --------------------------------------------------------------------------


def test_helpers_build_exact_sdk_messages() -> None:
    messages = [
        text_message("Hello there."),
        text_message("cut", stop_reason="max_tokens", input_tokens=10, output_tokens=4, id="msg_x"),
        tool_use_message([("read_file", {"path": "a.py"})], text="Reading."),
        tool_use_message([{"name": "run_bash", "input": {"command": "ls"}, "id": "toolu_mine"}]),
        make_message([{"type": "text", "text": "x"}], stop_reason="refusal", model="m"),
    ]
    for message in messages:
        assert_exact_message(dict(message))
    assert messages[1]["usage"]["input_tokens"] == 10 and messages[1]["id"] == "msg_x"
    assert messages[2]["stop_reason"] == "tool_use" and messages[2]["content"][1]["id"].startswith("toolu_01")
    assert messages[3]["content"][0]["id"] == "toolu_mine"
    assert messages[0]["usage"]["output_tokens"] >= 1
    with pytest.raises(ValueError):
        tool_use_message([])


def test_api_error_classifies_statuses() -> None:
    overloaded = api_error(529, retry_after=2.5)
    assert isinstance(overloaded, TransientModelError)
    assert (overloaded.status, overloaded.error_type, overloaded.retry_after) == (
        529,
        "overloaded_error",
        2.5,
    )
    assert isinstance(api_error(429), TransientModelError)
    assert isinstance(api_error(500), TransientModelError)
    denied = api_error(401)
    assert isinstance(denied, ModelError) and not isinstance(denied, TransientModelError)
    assert denied.error_type == "authentication_error"


# --- ScriptedModel ------------------------------------------------------------------------------


def test_scripted_model_serves_in_order_and_records_requests() -> None:
    model = ScriptedModel([tool_use_message([("list_dir", {"path": "."})]), text_message("done")])
    assert model.name == "scripted" and model.remaining == 2
    request: dict[str, Any] = {"model": "m", "max_tokens": 10, "messages": [{"role": "user", "content": "go"}]}
    first = model.create(request)
    request["messages"].append({"role": "assistant", "content": "mutated after the call"})
    second = model.create(request)
    assert first["message"]["stop_reason"] == "tool_use"
    assert second["message"]["content"][0]["text"] == "done"
    assert first["request_id"] and first["request_id"] != second["request_id"]
    assert len(model.requests) == 2 and len(model.requests[0]["messages"]) == 1
    assert model.remaining == 0


def test_scripted_model_says_clearly_when_it_runs_dry() -> None:
    model = ScriptedModel([text_message("one"), text_message("two")])
    request = {"model": "m", "max_tokens": 10, "messages": [{"role": "user", "content": "go"}]}
    model.create(request)
    model.create(request)
    with pytest.raises(ScriptExhaustedError, match=r"request 3 but only 2 replies") as caught:
        model.create(request)
    assert isinstance(caught.value, ModelError) and not isinstance(caught.value, TransientModelError)
    assert len(model.requests) == 3
    model.add(text_message("three"))
    assert model.create(request)["message"]["content"][0]["text"] == "three"


def test_scripted_model_raises_scripted_errors_then_goes_on() -> None:
    model = ScriptedModel([api_error(529, retry_after=1.0), text_message("recovered")])
    request = {"model": "m", "max_tokens": 10, "messages": [{"role": "user", "content": "go"}]}
    with pytest.raises(TransientModelError) as caught:
        model.create(request)
    assert caught.value.status == 529 and caught.value.retry_after == 1.0
    assert model.create(request)["message"]["content"][0]["text"] == "recovered"
    assert len(model.requests) == 2


def test_scripted_model_streams_text_in_pieces() -> None:
    text = "I read the file and the bug is in the median function, which forgets to sort."
    pieces: list[str] = []
    ScriptedModel([text_message(text)]).create({"messages": []}, on_text=pieces.append)
    assert "".join(pieces) == text and 2 <= len(pieces) <= 5


def test_scripted_model_functions_and_replies() -> None:
    model = ScriptedModel(
        [
            lambda request: text_message(f"{len(request['messages'])} messages"),
            {"message": text_message("with an id"), "request_id": "req_given"},
            lambda request: api_error(500),
        ]
    )
    request = {"messages": [{"role": "user", "content": "a"}, {"role": "user", "content": "b"}]}
    assert model.create(request)["message"]["content"][0]["text"] == "2 messages"
    assert model.create(request)["request_id"] == "req_given"
    with pytest.raises(TransientModelError):
        model.create(request)


def test_scripted_model_refuses_bad_scripts_up_front() -> None:
    with pytest.raises(ValueError, match="scripted reply 2"):
        ScriptedModel([text_message("ok"), {"role": "assistant", "content": "hi"}])
    with pytest.raises(TypeError):
        ScriptedModel([42])  # type: ignore[list-item]
    with pytest.raises(TypeError, match="instance"):
        ScriptedModel([TransientModelError])  # type: ignore[list-item]


def test_scripted_usage_grows_with_the_request_unless_given() -> None:
    model = ScriptedModel([text_message("a"), text_message("b"), text_message("c", input_tokens=123)])
    small = model.create({"messages": [{"role": "user", "content": "hi"}]})
    big = model.create({"messages": [{"role": "user", "content": "hi " * 400}]})
    fixed = model.create({"messages": [{"role": "user", "content": "hi " * 400}]})
    assert 0 < small["message"]["usage"]["input_tokens"] < big["message"]["usage"]["input_tokens"]
    assert big["message"]["usage"]["input_tokens"] == pytest.approx(1200 / 4, rel=0.2)
    assert fixed["message"]["usage"]["input_tokens"] == 123


def test_scripted_model_keeps_tool_use_ids_unique_in_a_conversation() -> None:
    call = [("run_bash", {"command": "python -m unittest"})]
    model = ScriptedModel([tool_use_message(call), tool_use_message(call)])
    first = model.create({"messages": [{"role": "user", "content": "go"}]})["message"]
    conversation = [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": first["content"]},
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": first["content"][0]["id"], "content": "OK"}],
        },
    ]
    second = model.create({"messages": conversation})["message"]
    assert second["content"][0]["id"] != first["content"][0]["id"]
    assert_exact_message(second)


def test_scripted_model_copies_each_message_of_a_long_run_once(tmp_path: Path) -> None:
    # Every request carries the whole conversation: copying each whole request made a
    # 1,000-turn run quadratic (about 50 s). Each message is now copied once, when first sent.
    from nb_durable.agent.run.loop import run_agent

    turns = 40
    model = ScriptedModel([tool_use_message([("list_dir", {"path": "."})]) for _ in range(turns)] + [text_message("done")])
    result = run_agent("look", run_id="long", client=model, model="claude-test-1", workspace=tmp_path,
                       store=str(tmp_path / "runs"), max_turns=turns + 1)
    assert result.status == "completed" and len(model.requests) == turns + 1
    last = model.requests[-1]["messages"]
    assert len(last) == 2 * turns + 1
    assert len({id(m) for r in model.requests for m in r["messages"]}) == len(last)
    assert all(r["messages"] == last[: len(r["messages"])] for r in model.requests)


def test_scripted_model_records_what_was_sent_when_the_caller_changes_messages_after() -> None:
    model = ScriptedModel([text_message("a"), lambda request: request["messages"].clear() or text_message("b"), text_message("c")])
    first: dict[str, Any] = {"role": "user", "content": [{"type": "text", "text": "go"}]}
    request: dict[str, Any] = {"model": "m", "messages": [first]}
    model.create(request)
    first["content"][0]["text"] = "changed in place"
    request["messages"].append({"role": "assistant", "content": "added"})
    model.create(request)
    request["messages"].pop()
    model.create(request)
    assert [r["messages"] for r in model.requests] == [
        [{"role": "user", "content": [{"type": "text", "text": "go"}]}],
        [{"role": "user", "content": [{"type": "text", "text": "changed in place"}]}, {"role": "assistant", "content": "added"}],
        [{"role": "user", "content": [{"type": "text", "text": "changed in place"}]}],
    ]


def test_scripted_model_renames_a_tool_use_id_only_while_the_conversation_holds_it() -> None:
    call = [("run_bash", {"command": "ls"})]
    model = ScriptedModel([tool_use_message(call)] * 3)
    go = {"role": "user", "content": "go"}
    first = model.create({"messages": [go]})["message"]["content"][0]
    answer = {"role": "user", "content": [{"type": "tool_result", "tool_use_id": first["id"], "content": "OK"}]}
    second = model.create({"messages": [go, {"role": "assistant", "content": [first]}, answer]})["message"]["content"][0]
    again = model.create({"messages": [go]})["message"]["content"][0]  # the conversation was cut (compaction)
    assert second["id"] != first["id"] and again["id"] == first["id"]


def test_scripted_model_latency() -> None:
    start = time.perf_counter()
    ScriptedModel([text_message("x")], latency=0.05).create({"messages": []})
    assert time.perf_counter() - start >= 0.05


# --- the demo workspace ------------------------------------------------------------------------


def test_prepare_demo_workspace_copies_into_missing_or_empty_folders(tmp_path: Path) -> None:
    made = prepare_demo_workspace(tmp_path / "new" / "demo")
    assert sorted(p.name for p in made.iterdir()) == ["README.md", "calc.py", "test_calc.py"]
    empty = tmp_path / "empty"
    empty.mkdir()
    assert prepare_demo_workspace(empty) == empty and (empty / "calc.py").is_file()


def test_the_demo_project_ships_with_failing_tests(workspace: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "unittest"], cwd=workspace, capture_output=True, text=True, check=False
    )
    assert done.returncode != 0 and "FAILED (failures=2)" in done.stderr


def test_prepare_demo_workspace_never_overwrites_other_files(tmp_path: Path) -> None:
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("my notes")
    (mine / "calc.py").write_text("my own calc")
    with pytest.raises(FileExistsError, match=r"notes\.txt"):
        prepare_demo_workspace(mine)
    assert (mine / "calc.py").read_text() == "my own calc"
    assert not (mine / "test_calc.py").exists()
    (tmp_path / "a_file").write_text("x")
    with pytest.raises(FileExistsError, match="not a folder"):
        prepare_demo_workspace(tmp_path / "a_file")


def test_prepare_demo_workspace_keeps_or_resets_an_earlier_copy(workspace: Path) -> None:
    calc = workspace / "calc.py"
    calc.write_text(calc.read_text().replace(BUG, FIX))
    (workspace / "__pycache__").mkdir()
    assert prepare_demo_workspace(workspace) == workspace
    assert FIX in calc.read_text()
    prepare_demo_workspace(workspace, reset=True)
    assert BUG in calc.read_text()


# --- DemoModel ----------------------------------------------------------------------------------


def test_demo_fixes_the_project_for_real(happy: tuple[Transcript, Path, float]) -> None:
    t, workspace, elapsed = happy
    assert t.final["stop_reason"] == "end_turn" and t.final["model"] == "demo"
    assert t.names() == ["list_dir", "read_file", "read_file", "run_bash", "write_file", "run_bash"]
    assert len(t.replies) == 6
    assert unittest_passes(workspace)
    assert FIX in (workspace / "calc.py").read_text()
    assert (workspace / "test_calc.py").read_bytes() == (
        REPO / "nb_durable/agent/models/demo/workspace_files/test_calc.py"
    ).read_bytes()
    assert "median" in t.final_text and "sorted(values)" in t.final_text and "pass" in t.final_text
    # Honest: the failures it reports are the ones the real test run printed.
    assert "test_median_of_unsorted_values" in t.final_text and "1 != 2" in t.final_text
    assert elapsed < 5, "latency=0 must not sleep"


def test_demo_transcript_is_deterministic(happy: tuple[Transcript, Path, float], tmp_path: Path) -> None:
    first = happy[0]
    # The same conversations give the same replies, ids and usage included.
    again = [demo().create(request) for request in first.requests]
    assert again == first.replies
    # A second live run (in another folder, so tool output differs only in paths and timings)
    # says and does the same things.
    other = drive(demo(), prepare_demo_workspace(tmp_path / "other"))

    def said(t: Transcript) -> list[Any]:
        return [
            [(b["type"], b.get("text"), b.get("name"), b.get("input")) for b in r["message"]["content"]]
            for r in t.replies
        ]

    assert said(other) == said(first)


def test_demo_usage_grows_with_the_conversation(happy: tuple[Transcript, Path, float]) -> None:
    t = happy[0]
    inputs = [r["message"]["usage"]["input_tokens"] for r in t.replies]
    assert inputs == sorted(inputs) and len(set(inputs)) == len(inputs)
    last_chars = len(json.dumps(t.requests[-1]["messages"]))
    assert inputs[-1] >= last_chars / 4 * 0.8
    for reply in t.replies:
        content = reply["message"]["content"]
        said = sum(len(b.get("text", "")) + len(json.dumps(b.get("input", ""))) for b in content)
        calls = sum(b["type"] == "tool_use" for b in content)
        # ~chars/4, plus a little per tool call (its name and the call's framing).
        assert said / 4 * 0.9 <= reply["message"]["usage"]["output_tokens"] <= said / 4 * 1.1 + 25 * calls + 2
    # The write_file turn carries the whole corrected file, so it is the most expensive to say.
    outputs = [r["message"]["usage"]["output_tokens"] for r in t.replies]
    assert outputs.index(max(outputs)) == t.names().index("write_file") - 1


def test_demo_streams_text_in_small_pieces(happy: tuple[Transcript, Path, float]) -> None:
    t = happy[0]
    assert all(len(p) >= 3 for p in t.streamed)
    assert max(len(piece.split()) for pieces in t.streamed for piece in pieces) <= 3


def test_demo_latency_is_realistic_and_scalable(monkeypatch: pytest.MonkeyPatch) -> None:
    waits: list[float] = []
    model = DemoModel(latency=1, sleep=waits.append)
    request = {"messages": [{"role": "user", "content": DEMO_TASK}], "tools": TOOLS}
    model.create(request)
    assert 0.4 <= sum(waits) <= 1.2 and len(waits) >= 3
    monkeypatch.setenv("NB_DURABLE_DEMO_LATENCY", "0.5")
    halved: list[float] = []
    DemoModel(sleep=halved.append).create(request)
    assert sum(halved) == pytest.approx(sum(waits) / 2)
    none: list[float] = []
    DemoModel(latency=0, sleep=none.append).create(request)
    assert none == []
    monkeypatch.setenv("NB_DURABLE_DEMO_LATENCY", "fast")
    said = re.escape("must be a number from 0 to 1000 (the demo's pace: 1 is about a real model's, 0 no waiting)")
    with pytest.raises(SettingError, match=rf"^NB_DURABLE_DEMO_LATENCY {said}, not 'fast'$"):
        DemoModel()
    # No wait can take these: inf overflowed time.sleep at the run's first model call.
    for slow in ("inf", "1e300"):
        monkeypatch.setenv("NB_DURABLE_DEMO_LATENCY", slow)
        with pytest.raises(SettingError, match=rf"^NB_DURABLE_DEMO_LATENCY {said}, not '{slow}'$"):
            DemoModel()
    for wrong in (-1, math.inf, math.nan):
        with pytest.raises(SettingError, match=rf"^latency {said}, not {wrong}$"):
            DemoModel(latency=wrong)


def test_demo_says_so_when_the_fix_is_already_there(workspace: Path) -> None:
    calc = workspace / "calc.py"
    calc.write_text(calc.read_text().replace(BUG, FIX))
    t = drive(demo(), workspace)
    assert "write_file" not in t.names()
    assert "already pass" in t.final_text and t.final["stop_reason"] == "end_turn"


def test_demo_checks_the_file_when_a_write_fails(workspace: Path) -> None:
    t = drive(demo(), workspace, override=answer("write_file", "PermissionError: calc.py is read-only"))
    assert t.names()[-2:] == ["write_file", "read_file"]
    assert "couldn't apply the fix" in t.final_text and "read-only" in t.final_text
    assert BUG in (workspace / "calc.py").read_text()


def test_demo_goes_on_when_an_unknown_write_outcome_turns_out_done(workspace: Path) -> None:
    def in_doubt(name: str, args: dict[str, Any], nth: int) -> tuple[str, bool] | None:
        if name != "write_file":
            return None
        run_tool(workspace, name, args)  # the effect happened; the process died before recording it
        return "the process died while this tool ran; its outcome is unknown", True

    t = drive(demo(), workspace, override=in_doubt)
    assert t.names()[-3:] == ["write_file", "read_file", "run_bash"]
    assert "Done" in t.final_text and "reading it back showed the fix" in t.final_text
    assert unittest_passes(workspace)


def test_demo_runs_the_tests_again_when_their_outcome_is_unknown(workspace: Path) -> None:
    lost = answer("run_bash", "outcome unknown: the process died", nth=0)
    t = drive(demo(), workspace, override=lost)
    assert t.names().count("run_bash") == 3
    assert "no side effects" in "".join(b.get("text", "") for b in t.replies[3]["message"]["content"])
    assert unittest_passes(workspace) and "Done" in t.final_text


def test_demo_falls_back_to_this_python_when_python3_is_missing(workspace: Path) -> None:
    missing = answer("run_bash", "/bin/sh: 1: python3: not found\n[exit status: 127]", is_error=False, nth=0)
    t = drive(DemoModel(latency=0, python="python3"), workspace, override=missing)
    commands = [args["command"] for name, args in t.calls if name == "run_bash"]
    assert len(commands) == 3 and commands[1].startswith(sys.executable) and commands[2] == commands[1]
    assert unittest_passes(workspace)


def test_demo_tries_the_usual_files_when_listing_fails(workspace: Path) -> None:
    t = drive(demo(), workspace, override=answer("list_dir", "PermissionError: cannot list ."))
    assert "Listing the folder failed" in "".join(
        b.get("text", "") for b in t.replies[1]["message"]["content"]
    )
    assert unittest_passes(workspace)


def test_demo_changes_nothing_when_it_does_not_recognise_the_bug(workspace: Path) -> None:
    calc = workspace / "calc.py"
    calc.write_text(calc.read_text().replace(BUG, FIX).replace("/ len(values)", "/ (len(values) - 1)"))
    before = calc.read_text()
    t = drive(demo(), workspace)
    assert "write_file" not in t.names() and "changed nothing" in t.final_text
    assert "test_mean" in t.final_text and calc.read_text() == before


def test_demo_stops_without_python_files(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("nothing to see")
    t = drive(demo(), tmp_path)
    assert t.names() == ["list_dir"] and "no Python files" in t.final_text


def test_demo_never_runs_a_project_it_does_not_know(tmp_path: Path) -> None:
    (tmp_path / "app.py").write_text("print('hi')\n")
    (tmp_path / "test_app.py").write_text("raise SystemExit('this must never run')\n")
    t = drive(demo(), tmp_path)
    assert t.names() == ["list_dir"] and t.final["stop_reason"] == "end_turn"
    assert "doesn't hold the demo project" in t.final_text and "`app.py`" in t.final_text


def test_demo_explains_when_tools_are_missing(tmp_path: Path) -> None:
    t = drive(demo(), tmp_path, tools=TOOLS[:2])
    assert t.calls == [] and t.final["stop_reason"] == "end_turn" and "run_bash" in t.final_text


def test_demo_admits_it_is_the_demo_for_other_tasks(workspace: Path) -> None:
    t = drive(demo(), workspace, task="Write me a poem about durable execution.")
    first = t.replies[0]["message"]["content"][0]["text"]
    assert "offline demo model" in first
    assert unittest_passes(workspace)


def test_demo_after_its_report(happy: tuple[Transcript, Path, float]) -> None:
    messages = [*happy[0].messages, {"role": "user", "content": "Thanks! Now add a mode() function."}]
    reply = demo().create({"messages": messages, "tools": TOOLS})["message"]
    assert reply["stop_reason"] == "end_turn" and "finished the demo task" in reply["content"][0]["text"]


def test_importing_offline_does_not_import_anthropic() -> None:
    code = "import sys, nb_durable.agent.models.scripted, nb_durable.agent.models.demo; assert 'anthropic' not in sys.modules, 'imported'"
    done = subprocess.run(
        [sys.executable, "-c", code], env=subprocess_env(), capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
