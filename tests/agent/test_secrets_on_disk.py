"""Whole agent runs cannot leave the workspace, and leave no secret in any file they write.

Proven with the real SDK against the loopback Messages API:

* Sandbox: a model that asks to read ``../outside``, ``/etc/passwd``, a symlink that points out,
  a folder through ``..``, and to write through ``..``, an absolute path and a symlinked folder,
  gets an ``is_error`` result for each, naming the way out; nothing outside the workspace is
  read into the conversation or touched (names, bytes and mtimes of the folder next door are
  unchanged, and nothing new appears there).
* Secrets: the CLI, in a process of its own, runs an agent with ``ANTHROPIC_API_KEY`` and
  ``MY_SERVICE_TOKEN`` in its environment (the key is really used: the server accepts only
  it). The model runs ``env`` and ``printenv``, reads a file that holds the token, and writes a
  report of what it saw; then the run is shown and exported as a notebook. Every file under the
  test's folder (the store, the workspace, the notebook, the working directory), except the
  input file that held the token from the start, is searched for each secret and for every
  12-character piece of it: none appears. Nor in any request body the model received, nor in
  anything the CLI printed. ``env`` and ``printenv`` show neither variable (tools do not
  inherit credentials); the file's copy of the token appears as its redaction marker, so the
  secret really passed through a tool.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from nb_durable.agent.models.anthropic import AnthropicModel
from nb_durable.agent.models.retry import RetryPolicy
from nb_durable.agent.run.loop import run_agent
from tests import forkserver
from tests.conftest import subprocess_env
from tests.fakes import MessagesAPIServer, ScriptedScenario, reply, tool_use

MODEL = "claude-test-1"
API_KEY = "sk-ant-test-SECRET-4f9c2e7a1b8d60537e1c"
TOKEN = "svc-live-tok-9d8c7b6a5f4e3d2c1b0a"
SECRETS = {"ANTHROPIC_API_KEY": API_KEY, "MY_SERVICE_TOKEN": TOKEN}


pytestmark = pytest.mark.usefixtures("no_ambient_anthropic")


def snapshot(folder: Path) -> dict[str, tuple[bytes, int]]:
    """Every file under ``folder``: bytes and mtime (ns)."""
    return {
        str(p.relative_to(folder)): (p.read_bytes(), p.stat().st_mtime_ns)
        for p in sorted(folder.rglob("*"))
        if p.is_file() and not p.is_symlink()
    }


def test_sandbox_escapes_are_refused_in_a_full_run(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "private.txt").write_text("outside data, not for the agent\n")
    workspace = tmp_path / "work"
    workspace.mkdir()
    (workspace / "notes.txt").write_text("inside\n")
    (workspace / "link_out").symlink_to(outside / "private.txt")
    (workspace / "link_dir").symlink_to(outside, target_is_directory=True)
    (workspace / "sub").mkdir()
    before = snapshot(outside)
    attempts = {
        "toolu_up": ("read_file", {"path": "../outside/private.txt"}, "leaves the workspace through '..'"),
        "toolu_passwd": ("read_file", {"path": "/etc/passwd"}, "is an absolute path"),
        "toolu_link": ("read_file", {"path": "link_out"}, "through the symlink 'link_out'"),
        "toolu_sneak": ("read_file", {"path": "sub/../../outside/private.txt"}, "through '..'"),
        "toolu_ls": ("list_dir", {"path": ".."}, "through '..'"),
        "toolu_lsdir": ("list_dir", {"path": "link_dir"}, "through the symlink 'link_dir'"),
        "toolu_wup": ("write_file", {"path": "../outside/pwned.txt", "content": "x"}, "through '..'"),
        "toolu_wabs": ("write_file", {"path": str(outside / "abs.txt"), "content": "x"}, "is an absolute path"),
        "toolu_wdir": ("write_file", {"path": "link_dir/pwned.txt", "content": "x"}, "through the symlink 'link_dir'"),
    }
    calls = [tool_use(name, tool_input, id=tid) for tid, (name, tool_input, _) in attempts.items()]
    turns = [reply("Let me look around.", *calls), reply("Everything outside the workspace is off limits.")]
    with MessagesAPIServer(ScriptedScenario(turns)) as server:
        result = run_agent(
            "Look around, outside the workspace too.",
            run_id="escape",
            client=AnthropicModel(api_key="test-key", base_url=server.url, timeout=10),
            model=MODEL,
            store=str(tmp_path / "runs"),
            workspace=workspace,
            retry=RetryPolicy(max_attempts=2, base_delay=0.0),
        )
        assert result.status == "completed"
        assert not server.rejected
        answers = {b["tool_use_id"]: b for b in server.requests[1].messages[-1]["content"]}
        bodies = json.dumps([r.body for r in server.requests])
    assert sorted(answers) == sorted(attempts)
    for tid, (_, _, says) in attempts.items():
        assert answers[tid]["is_error"] is True, (tid, answers[tid])
        assert says in answers[tid]["content"], (tid, answers[tid]["content"])
    assert "outside data" not in bodies and "root:x:0:0" not in bodies and "private.txt\\n" not in bodies
    assert snapshot(outside) == before, "something outside the workspace changed"
    assert sorted(p.name for p in outside.iterdir()) == ["private.txt"]
    assert sorted(p.name for p in workspace.iterdir()) == ["link_dir", "link_out", "notes.txt", "sub"]


def cli(*args: str, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return forkserver.run(
        [sys.executable, "-m", "nb_durable.cli", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def leaks(data: str | bytes) -> list[str]:
    """Which secrets appear in ``data``, whole or as any 12-character piece."""
    text = data.decode("utf-8", "replace") if isinstance(data, bytes) else data
    found = []
    for name, value in SECRETS.items():
        pieces = {value[i : i + 12] for i in range(len(value) - 11)}
        if any(piece in text for piece in pieces):
            found.append(name)
    return found


@pytest.mark.slow(10)
def test_secrets_never_reach_a_file_the_run_writes(tmp_path: Path) -> None:
    workspace = tmp_path / "work"
    workspace.mkdir()
    config = workspace / "service.cfg"
    config.write_text(f"[service]\nurl = https://example.invalid\ntoken = {TOKEN}\n")
    home = tmp_path / "cwd"
    home.mkdir()
    store = tmp_path / "runs"
    turns = [
        reply(
            "Let me see the environment and the config.",
            tool_use("run_bash", {"command": "env | sort"}, id="toolu_env"),
            tool_use("run_bash", {"command": "printenv MY_SERVICE_TOKEN ANTHROPIC_API_KEY"}, id="toolu_print"),
            tool_use("read_file", {"path": "service.cfg"}, id="toolu_cfg"),
        ),
        reply(
            "Writing down what I found.",
            tool_use(
                "write_file",
                {"path": "report.txt", "content": "token = [REDACTED:MY_SERVICE_TOKEN]\nkey is set\n"},
                id="toolu_report",
            ),
        ),
        reply("The service token is set (its value is redacted), and so is the API key."),
    ]
    with MessagesAPIServer(ScriptedScenario(turns), api_key=API_KEY) as server:
        env = subprocess_env(ANTHROPIC_API_KEY=API_KEY, ANTHROPIC_BASE_URL=server.url, MY_SERVICE_TOKEN=TOKEN)
        ran = cli(
            "run", "Check the service configuration.", "--run", "secrets", "--model", MODEL,
            "--workspace", str(workspace), "--store", str(store),
            env=env, cwd=home,
        )  # fmt: skip
        assert ran.returncode == 0, ran.stderr
        assert not server.rejected
        assert {r.headers["authorization"] for r in server.requests} == {f"Bearer {API_KEY}"}
        bodies = [json.dumps(r.body) for r in server.requests]
        results = {b["tool_use_id"]: b["content"] for b in server.requests[1].messages[-1]["content"]}
    shown = cli("show", "secrets", "--store", str(store), env=env, cwd=home)
    assert shown.returncode == 0, shown.stderr
    notebook = tmp_path / "exported" / "secrets.ipynb"
    notebook.parent.mkdir()
    exported = cli("export", "secrets", "--store", str(store), "-o", str(notebook), env=env, cwd=home)
    assert exported.returncode == 0, exported.stderr

    # The tools never saw the credential variables; the file's copy came out masked.
    assert "MY_SERVICE_TOKEN" not in results["toolu_env"] and "ANTHROPIC_API_KEY" not in results["toolu_env"]
    assert results["toolu_print"] == "[exit status 1]"  # printenv found neither
    assert "token = [REDACTED:MY_SERVICE_TOKEN]" in results["toolu_cfg"]
    cells = nbformat.read(notebook, as_version=4).cells
    nbformat.validate(nbformat.read(notebook, as_version=4))
    assert any("[REDACTED:MY_SERVICE_TOKEN]" in "".join(o.get("text", "") for o in c.get("outputs", [])) for c in cells)

    # ... and nowhere in the clear.
    for body in bodies:
        assert not leaks(body), "a secret reached the model"
    for output in (ran, shown, exported):
        assert not leaks(output.stdout + output.stderr), "the CLI printed a secret"
    written = [p for p in sorted(tmp_path.rglob("*")) if p.is_file() and p != config]
    assert store / "secrets.jsonl" in written and notebook in written and workspace / "report.txt" in written
    found = {str(p.relative_to(tmp_path)): leaks(p.read_bytes()) for p in written}
    assert not any(found.values()), {k: v for k, v in found.items() if v}
    assert TOKEN in config.read_text(), "the input file is the user's and stays as it was"


def test_the_leak_check_finds_pieces_of_secrets() -> None:
    # The search above must be able to fail: a cut-off secret still counts.
    assert leaks(f"xx{API_KEY[5:20]}yy") == ["ANTHROPIC_API_KEY"]
    assert leaks(TOKEN.encode()) == ["MY_SERVICE_TOKEN"]
    assert leaks("[REDACTED:MY_SERVICE_TOKEN] sk-ant-test") == []
