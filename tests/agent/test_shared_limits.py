"""Rate limits shared through the store hold across real CLI processes and the loopback API.

Each test starts real ``nb-durable run`` processes (the real SDK, ``ANTHROPIC_BASE_URL`` at the
loopback Messages API of this process; forked by ``tests/forkserver.py``, so each is its own
process without paying its own ``import anthropic``), each its own run, all sharing one store (a SQLite file,
a JSONL folder, or a schema of the private PostgreSQL server of ``tests/pg.py``); what is
asserted is read from the server's own request records (when each request arrived and when its
answer was finished). Counts and delays are small, for a 2-core machine: 10 processes of one
0.4 s call for the concurrency test, 6 processes of six short turns for the pause test. The
``--tokens-per-minute`` test shortens the one-minute window the only honest way: the test
spends it in the store as a process that called 52 s earlier would have, so 8 s are left;
the clock-skew test does the same for CLI processes whose clocks are 600 s ahead and behind
(``skewed_cli.py``), which must wait for that window's end, no earlier and not 10 minutes on.
"""

from __future__ import annotations

import re
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import pytest

from nb_durable import read_run
from nb_durable.agent.display.views import StepView
from nb_durable.agent.fleet.shared_limits import SharedLimits
from nb_durable.agent.models.anthropic import AnthropicModel
from nb_durable.agent.models.messages import text_message
from nb_durable.agent.models.scripted import ScriptedModel
from nb_durable.agent.run.hooks import Observer, RunHooks
from nb_durable.agent.run.loop import run_agent
from nb_durable.agent.settings import SessionOptions
from nb_durable.core.limiter import WINDOW, limiter_of
from nb_durable.core.stores import opened
from tests import forkserver
from tests.conftest import make_store_url, subprocess_env
from tests.fakes.messages_api import MessagesAPIServer
from tests.fakes.messages_api.content import tool_use
from tests.fakes.messages_api.records import RecordedRequest
from tests.fakes.messages_api.scenario import Action, Delay, Error, FunctionScenario, ScriptedScenario, reply
from tests.pg import postgres_url

MODEL = "claude-test-1"


def _start(store: str, run_id: str, workspace: Path, url: str, *flags: str, via: tuple[str, ...] = ("-m", "nb_durable.cli"),
           **env: str) -> subprocess.Popen[str]:  # fmt: skip
    # Forked from the fork server: each is its own process, without its own `import anthropic`.
    return forkserver.Popen(
        [
            sys.executable, *via, "run", f"Task {run_id}.", "--run", run_id,
            "--model", MODEL, "--workspace", str(workspace), "--store", store, *flags,
        ],
        env=subprocess_env(ANTHROPIC_BASE_URL=url, ANTHROPIC_API_KEY="test-key", **env),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _finish(processes: list[subprocess.Popen[str]]) -> list[str]:
    """Wait for every process; each must have completed its run (exit 0). Their stdout."""
    outputs = []
    for process in processes:
        out, err = process.communicate(timeout=180)
        assert process.returncode == 0, f"exit {process.returncode}\n{out}\n{err}"
        outputs.append(out)
    return outputs


def _max_in_flight(requests: list[RecordedRequest]) -> int:
    """The most requests the server was answering at one moment (an answer ends at finished_at)."""
    events: list[tuple[float, int]] = []
    for r in requests:
        assert r.finished_at is not None, f"request {r.index} was never answered"
        events += [(r.received_at, 1), (r.finished_at, -1)]
    most = now = 0
    for _, change in sorted(events):  # at a tie, -1 sorts first: one ending as another starts
        now += change
        most = max(most, now)
    return most


def _concurrency(tmp_path: Path, store: str, limit: int | None) -> int:
    workspace = tmp_path / "work"
    workspace.mkdir()
    flags = ("--max-concurrent-calls", str(limit)) if limit else ()
    with MessagesAPIServer(ScriptedScenario([Delay(0.4, reply("Done."))])) as server:
        processes = [_start(store, f"r{i}", workspace, server.url, *flags) for i in range(10)]
        outputs = _finish(processes)
        messages = server.requests_to("messages")
    assert len(messages) == 10, [r.outcome for r in messages]
    assert all(r.outcome == "reply" for r in messages)
    assert all("completed" in out for out in outputs)
    return _max_in_flight(messages)


@pytest.mark.slow(6)
def test_ten_processes_sharing_a_sqlite_store_never_have_more_than_two_calls_in_flight(tmp_path: Path) -> None:
    assert _concurrency(tmp_path, str(tmp_path / "runs.db"), 2) <= 2


@pytest.mark.slow(6)
def test_ten_processes_sharing_a_jsonl_folder_never_have_more_than_two_calls_in_flight(tmp_path: Path) -> None:
    assert _concurrency(tmp_path, str(tmp_path / "runs"), 2) <= 2


@pytest.mark.slow(6)
@pytest.mark.postgres
def test_ten_processes_sharing_a_postgresql_store_never_have_more_than_two_calls_in_flight(tmp_path: Path) -> None:
    assert _concurrency(tmp_path, postgres_url(), 2) <= 2


@pytest.mark.slow(6)
def test_without_a_shared_limit_the_same_processes_do_overlap(tmp_path: Path) -> None:
    # The control: what the limit prevents happens without it, so the tests above can fail.
    assert _concurrency(tmp_path, str(tmp_path / "runs.db"), None) > 2


PAUSE = 2.0
PROCESSES = 6
TURNS = 6


def _watch_pause(store: str, url: str, published: list[float], stop: threading.Event) -> None:
    """Note when the pause first shows in the store's limiter for ``url``'s endpoint (every 5 ms)."""
    with opened(store) as s:
        limiter = limiter_of(s)
        key = SharedLimits(SessionOptions(), s, AnthropicModel(base_url=url, api_key="test-key")).key
        while not stop.is_set():
            if limiter.paused_for(key) > 0:
                published.append(time.time())
                return
            stop.wait(0.005)


@pytest.mark.slow(6)
@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_a_429_retry_after_told_to_one_process_pauses_every_process_sharing_the_store(tmp_path: Path, kind: str) -> None:
    workspace = tmp_path / "work"
    workspace.mkdir()
    told: list[int] = []
    seen: set[str] = set()
    lock = threading.Lock()

    def answer(request: RecordedRequest) -> Action:
        with lock:
            seen.add(str(request.body["messages"][0]["content"]))
            # Only once every process has called: a process whose first call is still being
            # built (the SDK imported, the client made) is past its check, as any sender is.
            if len(seen) == PROCESSES and (request.turn or 0) >= 1 and not told:
                told.append(request.index)
                return Error(429, retry_after=PAUSE)
        if (request.turn or 0) < TURNS - 1:
            return Delay(0.1, reply("Looking.", tool_use("read_file", {"path": "missing.txt"})))
        return Delay(0.1, reply("Done."))

    store = make_store_url(kind, tmp_path)
    published: list[float] = []
    stop = threading.Event()
    with MessagesAPIServer(FunctionScenario(answer)) as server:
        watcher = threading.Thread(target=_watch_pause, args=(store, server.url, published, stop))
        watcher.start()
        # The limit comes from the environment here, as a JupyterHub would set it for every kernel.
        processes = [
            _start(store, f"p{i}", workspace, server.url, NB_DURABLE_MAX_CONCURRENT_CALLS="4") for i in range(PROCESSES)
        ]
        try:
            _finish(processes)
        finally:
            stop.set()
            watcher.join()
        messages = server.requests_to("messages")
    assert len(told) == 1
    limited = next(r for r in messages if r.index == told[0])
    assert limited.status == 429 and limited.finished_at is not None
    assert published, "the told process never published the pause in the store"
    # From the moment the pause is in the store until it ends, a process may still deliver the
    # one call it had checked for before (sent, or being sent); a second call means it asked
    # the store again and called anyway.
    start, end = published[0], limited.finished_at + PAUSE - 0.05
    during = [r for r in messages if start < r.received_at < end]
    per_process = Counter(str(r.body["messages"][0]["content"]) for r in during)
    assert all(n <= 1 for n in per_process.values()), (
        f"{len(during)} requests arrived during the shared {PAUSE}s pause (published "
        f"+{start - limited.finished_at:.2f}s after the 429): "
        + ", ".join(f"{r.index} at +{r.received_at - limited.finished_at:.2f}s" for r in during)
    )
    after = [r for r in messages if r.received_at >= end]
    others = {str(r.body["messages"][0]["content"]) for r in after}
    assert len(others) > 1, "the other processes had nothing left to ask after the pause: the test proves nothing"
    assert len(messages) == PROCESSES * TURNS + 1  # every run's turns, and the one 429


class _Views(Observer):
    def __init__(self) -> None:
        self.steps: list[StepView] = []

    def step_changed(self, step: StepView) -> None:
        self.steps.append(step)


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_a_spent_token_window_makes_the_next_run_on_the_store_wait_for_the_next_minute(tmp_path: Path, kind: str) -> None:
    # In one process, with a sleep that stops the run instead of waiting out the minute.
    store, workspace = make_store_url(kind, tmp_path), tmp_path / "work"
    workspace.mkdir()
    first = ScriptedModel([text_message("One.")])
    done = run_agent("First.", run_id="first", client=first, store=store, workspace=workspace, tokens_per_minute=1)
    assert done.status == "completed", "a request alone in an empty window goes through"
    waits: list[float] = []

    def stop(seconds: float) -> None:
        waits.append(seconds)
        raise KeyboardInterrupt("stopped instead of waiting")

    second, views = ScriptedModel([text_message("Two.")]), _Views()
    with pytest.raises(KeyboardInterrupt):
        run_agent(
            "Second.", run_id="second", client=second, store=store, workspace=workspace, tokens_per_minute=1,
            hooks=RunHooks(sleep=stop, observer=views),
        )
    assert second.requests == [], "the second run called although the window was spent"
    assert len(waits) == 1 and 50 < waits[0] <= 60, waits
    assert any(v.state == "retrying" and "input tokens a minute" in v.error for v in views.steps)
    # The wait is inside the model step (cut off here, asked again on resume), never an attempt or a step.
    steps = read_run("second", store).steps
    assert [s.step_id for s in steps] == ["model:0"] and steps[0].attempts == () and steps[0].state != "completed"


LEFT = 8.0  # seconds left of the window spent before the CLI processes start (a forked start: ~0.1 s, ~2 s loaded)
PER_MINUTE = 1000


@pytest.mark.slow(10)
@pytest.mark.postgres
def test_the_cli_tokens_per_minute_holds_a_call_until_the_window_another_process_spent_ends(tmp_path: Path) -> None:
    # The window is the store's: it is spent here as a process that called 52 s ago would have
    # spent it, so the minute ends LEFT seconds from now instead of a whole minute. One process
    # per kind of limiter (a SQLite store's files, a PostgreSQL store's row), side by side.
    stores = {"sqlite": make_store_url("sqlite", tmp_path), "postgres": postgres_url()}
    workspace = tmp_path / "work"
    workspace.mkdir()
    with MessagesAPIServer(ScriptedScenario([reply("Done.")])) as server:
        client = AnthropicModel(base_url=server.url, api_key="test-key")  # the endpoint the CLI will call
        window_end = time.time() + LEFT
        keys = {}
        for kind, store in stores.items():
            with opened(store) as s:
                keys[kind] = SharedLimits(SessionOptions(tokens_per_minute=PER_MINUTE), s, client).key
                assert limiter_of(s).take_tokens(keys[kind], PER_MINUTE, PER_MINUTE, window_end - WINDOW) == 0
        processes = [
            _start(store, f"on-{kind}", workspace, server.url, "--tokens-per-minute", str(PER_MINUTE))
            for kind, store in stores.items()
        ]
        outputs = dict(zip(stores, _finish(processes), strict=True))
        requests = server.requests
    for kind, store in stores.items():
        mine = [r for r in requests if r.body.get("messages", [{}])[0].get("content") == f"Task on-{kind}."]
        # The CLI counts the request's tokens (count_tokens), then checks the window: so it checked
        # while the window was spent, and the test can tell a wait from a slow start.
        counted = next((r for r in mine if r.endpoint == "count_tokens"), None)
        assert counted is not None, f"{kind}: the CLI never counted its tokens: --tokens-per-minute was not applied"
        assert counted.received_at < window_end, f"{kind}: the process started after the window ended: nothing to show"
        (call,) = [r for r in mine if r.endpoint == "messages"]
        went = call.received_at - window_end
        assert -0.01 <= went < 15, f"{kind}: the limited call went {went:+.2f}s after the window's end"
        assert "completed" in outputs[kind] and "input tokens a minute are spent on this endpoint" in outputs[kind], outputs[kind]
        with opened(store) as s:
            left = limiter_of(s).take_tokens(keys[kind], PER_MINUTE, PER_MINUTE, time.time())
        assert WINDOW - 20 < left <= WINDOW, f"{kind}: the call's tokens were not counted in the new window"


SKEW = 600.0
SKEWED = Path(__file__).with_name("skewed_cli.py")


@pytest.mark.slow(10)
@pytest.mark.postgres
def test_the_token_window_holds_for_processes_whose_clocks_are_ten_minutes_off(tmp_path: Path) -> None:
    # Each store's window is spent as by a process that called 40 s ago (by the store's clock,
    # which here is this machine's); then a CLI process whose clock is 600 s ahead, and one 600 s
    # behind, each on its own store, ask for the window. Neither may call before the window
    # ends, and neither may wait much past it (the behind one was told to wait 620 s).
    stores = {
        f"{kind}-{side}": (make_store_url(kind, tmp_path / side) if kind == "sqlite" else postgres_url(), offset)
        for kind in ("sqlite", "postgres")
        for side, offset in (("ahead", SKEW), ("behind", -SKEW))
    }
    workspace = tmp_path / "work"
    workspace.mkdir()
    with MessagesAPIServer(ScriptedScenario([reply("Done.")])) as server:
        client = AnthropicModel(base_url=server.url, api_key="test-key")
        window_end = time.time() + LEFT
        for name, (store, _) in stores.items():
            (tmp_path / name.split("-")[1]).mkdir(exist_ok=True)
            with opened(store) as s:
                key = SharedLimits(SessionOptions(tokens_per_minute=PER_MINUTE), s, client).key
                assert limiter_of(s).take_tokens(key, PER_MINUTE, PER_MINUTE, window_end - WINDOW) == 0
        processes = {
            name: _start(store, name, workspace, server.url, "--tokens-per-minute", str(PER_MINUTE), via=(str(SKEWED), str(offset)))
            for name, (store, offset) in stores.items()
        }
        outputs = {}
        for name, process in processes.items():
            try:
                out, err = process.communicate(timeout=LEFT + 90)
            except subprocess.TimeoutExpired:
                process.kill()
                out, err = process.communicate()
                raise AssertionError(f"{name} was still waiting {LEFT + 90:.0f}s after it started: {out[-300:]}") from None
            assert process.returncode == 0, f"{name}: exit {process.returncode}\n{out}\n{err}"
            outputs[name] = out
        requests = server.requests
    for name in stores:
        mine = [r for r in requests if r.body.get("messages", [{}])[0].get("content") == f"Task {name}."]
        counted = next(r for r in mine if r.endpoint == "count_tokens")
        assert counted.received_at < window_end, f"{name}: it started after the window ended: nothing to show"
        (call,) = [r for r in mine if r.endpoint == "messages"]
        went = call.received_at - window_end
        assert -0.05 <= went < 15, f"{name}: the limited call went {went:+.2f}s after the window's end\n{outputs[name]}"
        waits = [float(w) for w in re.findall(r"waiting ([0-9.]+)s: \d+ input tokens a minute", outputs[name])]
        assert waits and max(waits) <= WINDOW, f"{name} was told to wait {waits}"


def test_a_retry_after_longer_than_the_policy_honours_pauses_the_store_no_longer(tmp_path: Path) -> None:
    # A proxy that asks for an hour: the retry policy waits its max_retry_after (300 s), and
    # the pause published for every process sharing the store must end then too, not an hour on.
    store, workspace = make_store_url("sqlite", tmp_path), tmp_path / "work"
    workspace.mkdir()
    with MessagesAPIServer(ScriptedScenario([[Error(529, retry_after=3600), reply("Done.")]])) as server:
        client = AnthropicModel(api_key="test-key", base_url=server.url, timeout=10)
        waits: list[float] = []
        done = run_agent(
            "Task.", run_id="told", client=client, model=MODEL, store=store, workspace=workspace,
            max_concurrent_calls=2, hooks=RunHooks(sleep=waits.append),
        )  # fmt: skip
        assert done.status == "completed"
        with opened(store) as s:
            published = limiter_of(s).paused_for(SharedLimits(SessionOptions(max_concurrent_calls=2), s, client).key)
    # The policy's wait, then (this sleep does not pass time) the store's pause, no longer.
    assert waits[0] == 300.0 and max(waits) <= 300.0, waits
    assert 290 < published <= 300, published
