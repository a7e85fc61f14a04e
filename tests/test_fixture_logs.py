"""Logs written by nb_durable 0.1 stay readable and replayable by the current code.

``tests/fixtures/logs/`` holds a JSONL store and a SQLite store written once by the 0.1 code
(``make_fixtures.py`` there says how; it is not re-run) and ``expected.json``, what 0.1's
``read_run`` read from them. Each test works on a copy of a store in ``tmp_path``, never on
the committed files, and uses only public names, so it keeps checking the same thing while
the package's modules move.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn

import pytest

import nb_durable
from nb_durable import DivergenceError, EventLog, ToolRegistry, durable_run, run_step, step
from nb_durable.agent import RunHooks, builtin_tools
from nb_durable.testing import ScriptedModel

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "logs"
MANIFEST: dict[str, Any] = json.loads((FIXTURES / "expected.json").read_text(encoding="utf-8"))
STORES: dict[str, Any] = MANIFEST["stores"]
RUNS = ("agent-run", "plain-run", "durable-run")
APPROVE_BASH = r"\brm\b"  # what the agent run was started with (make_fixtures.py)


def result_hash(value: Any) -> str:
    """The manifest's hash of a result: SHA-256 of its canonical JSON."""
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def must_not_run(*args: Any, **kwargs: Any) -> NoReturn:
    raise AssertionError("replaying a recorded step executed it")


class Store:
    """A copy of one committed fixture store, and the raw bytes of its lines."""

    def __init__(self, kind: str, tmp_path: Path) -> None:
        self.kind = kind
        self.expected: dict[str, Any] = STORES[kind]["runs"]
        source = FIXTURES / STORES[kind]["path"]
        if kind == "jsonl":
            self.path = tmp_path / "jsonl"
            shutil.copytree(source, self.path, ignore=shutil.ignore_patterns(".leases"))
            self.url = str(self.path)
        else:
            self.path = tmp_path / source.name
            shutil.copyfile(source, self.path)
            self.url = f"sqlite:///{self.path}"

    def lines(self) -> dict[str, list[bytes]]:
        """Every stored line of every run, byte for byte."""
        if self.kind == "jsonl":
            return {p.stem: p.read_bytes().splitlines() for p in sorted(self.path.glob("*.jsonl"))}
        conn = sqlite3.connect(self.path)
        try:
            rows = conn.execute(
                "SELECT run_id, seq, line FROM nb_durable_events ORDER BY run_id, seq"
            ).fetchall()
        finally:
            conn.close()
        out: dict[str, list[bytes]] = {}
        for run_id, seq, line in rows:
            assert seq == len(out.setdefault(run_id, [])), (run_id, seq)
            out[run_id].append(bytes(line))
        return out


@pytest.fixture(params=sorted(STORES))
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Store:
    return Store(request.param, tmp_path)


def test_the_fixtures_hold_what_they_are_meant_to() -> None:
    """The manifest is not empty, and the runs hold every kind of event and step state."""
    assert sorted(STORES) == ["jsonl", "sqlite"]
    for kind, entry in STORES.items():
        assert (FIXTURES / entry["path"]).exists(), kind
        runs = entry["runs"]
        assert sorted(runs) == sorted(RUNS), kind
        assert all(run["status"] == "completed" and run["steps"] for run in runs.values()), kind
        kinds = {k for run in runs.values() for k in run["event_kinds"]}
        assert kinds == {
            "run_started",
            "step_started",
            "step_completed",
            "attempt_failed",
            "decision",
            "run_finished",
        }
        agent = runs["agent-run"]["steps"]
        assert {s["state"] for s in agent} == {"completed", "skipped"}
        decisions = {tuple(d) for s in agent for d in s["decisions"]}
        assert decisions == {("approved", "person"), ("skip", "policy"), ("rerun", "policy")}
        assert any(a[2] == 529 for s in agent for a in s["attempts"])
    assert STORES["jsonl"]["runs"] == STORES["sqlite"]["runs"]


def test_read_run_reads_what_0_1_read(store: Store) -> None:
    for run_id, expected in store.expected.items():
        record = nb_durable.read_run(run_id, store.url)
        summary = record.summary
        assert (summary.run_id, summary.status) == (run_id, expected["status"])
        assert summary.settings == expected["settings"], run_id
        assert (summary.output, summary.error) == (expected["output"], expected["error"]), run_id
        assert [e.kind for e in record.events] == expected["event_kinds"], run_id
        assert (summary.steps, summary.completed_steps) == (
            len(expected["steps"]),
            sum(s["state"] == "completed" for s in expected["steps"]),
        )
        assert [s.step_id for s in record.steps] == [s["id"] for s in expected["steps"]], run_id
        assert [s.position for s in record.steps] == list(range(len(expected["steps"])))
        for got, want in zip(record.steps, expected["steps"], strict=True):
            where = f"{run_id} step {want['id']}"
            assert got.state == want["state"], where
            assert got.hash == want["hash"], where
            if want["effect"] is not None:  # a pure step writes no intent, so 0.1 read no effect
                assert got.effect == want["effect"], where
            assert [[a.attempt, a.error, a.status] for a in got.attempts] == want["attempts"], where
            assert [[d.decision, d.by] for d in got.decisions] == want["decisions"], where
            assert result_hash(got.result) == want["result_sha256"], where


def test_list_runs_lists_every_fixture_run(store: Store) -> None:
    listed = {s.run_id: s for s in nb_durable.list_runs(store.url)}
    assert sorted(listed) == sorted(RUNS)
    for run_id, expected in store.expected.items():
        assert listed[run_id].status == expected["status"], run_id
        assert listed[run_id].steps == len(expected["steps"]), run_id
        assert listed[run_id].holder is None, run_id


def test_the_plain_run_replays_without_running_a_step(store: Store) -> None:
    before = store.lines()
    expected = store.expected["plain-run"]
    requests: dict[str, Any] = {"load": {"path": "data.csv", "limit": 3}, "send": {"to": "team@example.org"}}
    effects: dict[str, Any] = {"normalize": "idempotent", "send": "external"}
    by_id = {s["id"]: s for s in expected["steps"]}
    for step_id, request in requests.items():
        assert nb_durable.request_hash(request) == by_id[step_id]["hash"], step_id
    with EventLog("plain-run", store.url) as log:
        assert log.status == "completed"
        results = [
            run_step(
                log, s["id"], must_not_run, effect=effects.get(s["id"], "pure"), request=requests.get(s["id"])
            )
            for s in expected["steps"]
        ]
        assert not log.replaying and log.cursor == len(expected["steps"])
        log.finish_run("completed", output=expected["output"])  # the same ending: nothing to write
    assert [result_hash(r) for r in results] == [s["result_sha256"] for s in expected["steps"]]
    with EventLog("plain-run", store.url) as log, pytest.raises(DivergenceError):
        run_step(log, "load", must_not_run, request={"path": "other.csv", "limit": 3})
    assert store.lines() == before


@step(name="fetch")
def fetch(url: str, *, retries: int = 0) -> dict[str, Any]:
    must_not_run()


@step(name="publish", effect="external")
def publish(pages: list[dict[str, Any]]) -> str:
    must_not_run()


def test_the_durable_run_replays_without_running_a_step(store: Store) -> None:
    before = store.lines()
    expected = store.expected["durable-run"]
    with durable_run("durable-run", store.url, settings=expected["settings"]) as log:
        pages = [fetch("https://example.org/a"), fetch("https://example.org/b", retries=1)]
        results = [*pages, publish(pages)]
        assert not log.replaying
    assert [result_hash(r) for r in results] == [s["result_sha256"] for s in expected["steps"]]
    assert store.lines() == before


class NothingRuns(ToolRegistry):
    """The agent run's tools, with their schemas and approval rules, none of which may run."""

    def run(self, name: str, tool_input: Any, context: Any) -> NoReturn:
        raise AssertionError(f"replaying the finished agent run ran tool {name}")

    def check(self, name: str, tool_input: Any, context: Any) -> NoReturn:
        raise AssertionError(f"replaying the finished agent run checked tool {name}")


def agent_tools() -> ToolRegistry:
    """The same tools the agent run was recorded with (make_fixtures.py), none of them runnable."""
    registry = NothingRuns(builtin_tools(approve_bash=APPROVE_BASH))

    @registry.tool(effect="external")
    def deploy(target: str) -> str:
        """Deploy the note to a target.

        Args:
            target: where to deploy, such as 'staging'.
        """
        must_not_run()

    @registry.tool(effect="external")
    def notify(message: str) -> str:
        """Tell the team something.

        Args:
            message: what to say.
        """
        must_not_run()

    return registry


def refuse(what: str) -> Callable[..., NoReturn]:
    def answer(*args: Any) -> NoReturn:
        raise AssertionError(f"replaying the finished agent run asked for {what}")

    return answer


def test_the_agent_run_replays_without_a_model_request(store: Store) -> None:
    before = store.lines()
    expected = store.expected["agent-run"]
    workspace = expected["settings"]["workspace"]
    assert os.path.isdir(workspace), f"the fixture's recorded workspace {workspace} must exist to resume it"
    model = ScriptedModel([])
    result = nb_durable.resume_agent(
        "agent-run",
        store=store.url,
        client=model,
        tools=agent_tools(),
        in_doubt="fail",
        hooks=RunHooks(approve=refuse("an approval"), sleep=refuse("a retry")),
    )
    assert model.requests == []
    assert result.live_steps == 0
    assert result.replayed_steps > 0
    assert result.status == "completed"
    assert result.text == expected["output"]["text"]
    assert result.stop_reason == expected["output"]["stop_reason"]
    assert result.turns == expected["output"]["turns"]
    assert store.lines() == before


def test_a_run_recorded_before_thinking_and_caching_resumes_pinning_the_same_requests(tmp_path: Path) -> None:
    """0.1's agent run cut after its second turn (as a crash would leave it), resumed now.

    Prompt caching is on by default and thinking is requested by default, but neither is
    part of a step's request hash and a run recorded without thinking goes on without it:
    the third model request the current code sends hashes exactly as 0.1's recorded one.
    """
    expected = STORES["jsonl"]["runs"]["agent-run"]
    source = (FIXTURES / "jsonl" / "agent-run.jsonl").read_bytes().splitlines(keepends=True)
    cut = next(i for i, line in enumerate(source) if b'"step_completed"' in line and b'"tool:1:0:' in line)
    runs = tmp_path / "runs"
    runs.mkdir()
    (runs / "agent-run.jsonl").write_bytes(b"".join(source[: cut + 1]))
    model = ScriptedModel([nb_durable.agent.models.messages.text_message("All done.")])
    result = nb_durable.resume_agent(
        "agent-run", store=str(runs), client=model, tools=agent_tools(), hooks=RunHooks(sleep=refuse("a retry"))
    )
    assert result.status == "completed" and result.text == "All done."
    (request,) = model.requests
    assert request["cache_control"] == {"type": "ephemeral", "ttl": "5m"}
    assert "thinking" not in request and "output_config" not in request
    assert request["max_tokens"] == expected["settings"]["max_tokens"]
    recorded = {s["id"]: s["hash"] for s in expected["steps"]}
    resumed = {s.step_id: s.hash for s in nb_durable.read_run("agent-run", str(runs)).steps}
    assert resumed["model:2"] == recorded["model:2"]
