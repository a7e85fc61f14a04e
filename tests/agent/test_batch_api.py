"""Batch mode (``batch_api``): model calls through Message Batches of the loopback API, at half price.

The real SDK talks to the fake's batches endpoints (``tests.fakes.messages_api.batches``).
Proven here, in-process: a batch-mode run completes with every call in a batch and its cost
at batch prices (the session's, the run index's and the log reader's alike); several runs at
once share one batch per round of turns; an expired or errored result falls back to one
normal call, recorded; a resumed step whose log names a batch polls it and sends nothing
again; a step cut off between the batch's creation and its record finds its batch by listing
(and one cut off before sending sends without looking), as a create call whose answer was lost
finds the batch it made; a run keeps the mode it recorded; a
stopping worker stops a run waiting on its batch; replay of a finished batch-mode run sends
nothing; a custom id is always valid; gatherers are per endpoint and credential; a model
without Message Batches, the demo model among them, is refused before anything is recorded or queued. SIGKILLed processes are
``test_batch_api_crash``.
"""

from __future__ import annotations

import gc
import re
import threading
import weakref
from pathlib import Path
from typing import Any

import pytest

from nb_durable.agent import RunHooks
from nb_durable.agent.display.views import views_of
from nb_durable.agent.fleet.batch import submit_batch
from nb_durable.agent.fleet.batch_file import BatchTask, read_batch
from nb_durable.agent.fleet.worker import STOPPED_BY_WORKER, ResumeWorker
from nb_durable.agent.models.anthropic import AnthropicModel
from nb_durable.agent.models.base import endpoint_of
from nb_durable.agent.models.message_batches import Gatherer, custom_id_of, gatherer_for
from nb_durable.agent.models.scripted import ScriptedModel
from nb_durable.agent.money.cost import Usage
from nb_durable.agent.money.prices import BATCH_DISCOUNT, price_for
from nb_durable.agent.run.batch_step import BATCH_BY, GATHERING, IN_BATCH
from nb_durable.agent.run.crash import CrashAt
from nb_durable.agent.run.loop import AgentResult, resume_agent, run_agent
from nb_durable.agent.run.prepare import prepare_run
from nb_durable.agent.run.stopping import RunStopped, StopSignal
from nb_durable.core.events import Decision, StepStarted
from nb_durable.core.index.claim import release_claims
from nb_durable.core.runs import list_runs, read_run, read_summary
from nb_durable.core.stores import opened
from nb_durable.errors import BatchFileError, RetriesExhaustedError, RunError, SettingError, SimulatedCrash
from tests.fakes import Error, Expired, FunctionScenario, MessagesAPIServer, RecordedRequest, reply, tool_use

MODEL = "claude-test-1"


pytestmark = pytest.mark.usefixtures("no_ambient_anthropic")


def two_turns(request: RecordedRequest) -> Any:
    """Turn 0 lists the workspace, turn 1 answers: the same for every run (by its task)."""
    task = str(request.messages[0]["content"])
    if request.turn == 0:
        return reply("Looking.", tool_use("list_dir", {"path": "."}, id=f"toolu_{abs(hash(task)) % 10**8}"))
    return reply(f"Done: {task}")


def batch_run(
    server: MessagesAPIServer, tmp_path: Path, task: str = "look around", store: str | None = None, **values: Any
) -> AgentResult:
    workspace = tmp_path / "ws"
    workspace.mkdir(exist_ok=True)
    return run_agent(
        task,
        client=AnthropicModel(api_key="test-key", base_url=server.url, timeout=10),
        model=MODEL,
        store=store or str(tmp_path / "runs"),
        workspace=workspace,
        hooks=RunHooks(sleep=lambda s: None),
        **{"batch_api": True, **values},
    )


def test_a_batch_mode_run_sends_every_call_in_a_batch_and_pays_half(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path}/runs.db"
    with MessagesAPIServer(FunctionScenario(two_turns)) as server:
        result = batch_run(server, tmp_path, store=store)
        assert result.status == "completed" and result.text == "Done: look around"
        assert server.requests_to("messages") == []  # nothing sent outside a batch
        assert len(server.batches.created) == 2 and server.batches.request_count == 2
        usage = sum((Usage.of(r.reply or {}) for r in server.requests_to("batch_request")), Usage())
        full = price_for(MODEL).dollars(usage)
        assert result.cost.paid_dollars == pytest.approx(full * BATCH_DISCOUNT)
        summary = read_summary(result.run_id, store)
        assert summary.settings["batch_api"] is True  # recorded: a resume and a worker use the same mode
        (row,) = list_runs(store)
        assert row.figures["dollars"] == pytest.approx(full * BATCH_DISCOUNT)  # the run index: `runs`
        record = read_run(result.run_id, store)
        assert views_of(record)[0].cost.paid_dollars == pytest.approx(full * BATCH_DISCOUNT)  # `show`
        model_steps = [s for s in record.steps if s.step_id.startswith("model:")]
        assert all(s.result["batch"]["id"] in {b.id for b in server.batches.created} for s in model_steps)
        for step in model_steps:
            gathering, sent = [d for d in step.decisions if d.by == BATCH_BY]
            assert (gathering.decision, sent.decision) == (GATHERING, IN_BATCH + step.result["batch"]["id"])
            assert gathering.note == sent.note == custom_id_of(result.run_id, step.step_id) == step.result["batch"]["custom_id"]

        # Replay of the finished run sends nothing.
        before = len(server.requests)
        again = batch_run(server, tmp_path, store=store)
        assert again.live_steps == 0 and again.text == result.text and len(server.requests) == before


def test_runs_at_once_share_one_batch_per_round(tmp_path: Path) -> None:
    with MessagesAPIServer(FunctionScenario(two_turns)) as server:
        results: dict[str, AgentResult] = {}

        def one(n: int) -> None:
            results[str(n)] = batch_run(server, tmp_path / str(n), task=f"task {n}")

        threads = [threading.Thread(target=one, args=(n,)) for n in range(4)]
        for path in ("0", "1", "2", "3"):
            (tmp_path / path).mkdir()
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert sorted(r.status for r in results.values()) == ["completed"] * 4
        assert [len(b.requests) for b in server.batches.created] == [4, 4]  # one batch per turn, all four runs
        assert server.requests_to("messages") == []


@pytest.mark.parametrize("outcome", [Expired(), Error(500, message="batch request failed")])
def test_an_expired_or_errored_result_falls_back_to_one_normal_call(tmp_path: Path, outcome: Any) -> None:
    def scenario(request: RecordedRequest) -> Any:
        if request.endpoint == "batch_request" and request.turn == 1:
            return outcome
        return two_turns(request)

    with MessagesAPIServer(FunctionScenario(scenario)) as server:
        result = batch_run(server, tmp_path)
        assert result.status == "completed" and result.text == "Done: look around"
        direct = server.requests_to("messages")
        assert len(direct) == 1 and direct[0].turn == 1  # the fallback, once
        record = read_run(result.run_id, tmp_path / "runs")
        step = record.steps[-1]
        assert step.step_id == "model:1" and "batch" not in step.result  # priced at the full price
        kind = "expired" if isinstance(outcome, Expired) else "errored"
        said = [(d.decision, d.by) for d in step.decisions]
        assert said == [
            (GATHERING, BATCH_BY), (IN_BATCH + server.batches.created[1].id, BATCH_BY), (f"batch {kind}: asked directly", BATCH_BY)
        ]  # fmt: skip
        usage = [Usage.of(r.reply or {}) for r in server.requests if r.outcome == "reply"]
        price = price_for(MODEL)
        assert result.cost.paid_dollars == pytest.approx(price.batched().dollars(usage[0]) + price.dollars(usage[1]))


def test_a_step_whose_log_names_a_batch_polls_it_and_sends_nothing_again(tmp_path: Path) -> None:
    """A session stopped while its batch runs (the batch held by the fake) resumes by polling
    the batch its log names: nothing is sent again."""
    with MessagesAPIServer(FunctionScenario(two_turns), batch_delay=float("inf")) as server:
        stop = StopSignal()
        hooks = RunHooks(sleep=lambda s: None, stop=stop)
        workspace = tmp_path / "ws"
        workspace.mkdir()

        server.once_batch_polled(stop.request)
        with pytest.raises(RunStopped):
            run_agent(
                "look around",
                run_id="cut",
                client=AnthropicModel(api_key="test-key", base_url=server.url, timeout=10),
                model=MODEL,
                store=str(tmp_path / "runs"),
                workspace=workspace,
                hooks=hooks,
                batch_api=True,
            )
        assert len(server.batches.created) == 1
        events = read_run("cut", tmp_path / "runs").events
        assert any(isinstance(e, StepStarted) and e.step == "model:0" for e in events)
        assert [e.decision for e in events if isinstance(e, Decision)] == [GATHERING, IN_BATCH + server.batches.created[0].id]

        server.batches.delay = 0.0
        result = resume_agent("cut", store=str(tmp_path / "runs"), client=AnthropicModel(api_key="test-key", base_url=server.url))
        assert result.status == "completed"
        assert [len(b.requests) for b in server.batches.created] == [1, 1]  # turn 0's batch polled, not sent again
        assert all(s.repeats == 0 for s in server.turn_stats().values())
        assert server.requests_to("messages") == []


def test_a_custom_id_is_always_valid_and_the_same_on_every_resume() -> None:
    ids = [custom_id_of(run, step) for run in ("r", "a.b.c", "x" * 300, "ünï:cødé") for step in ("model:0", "tool:1:0:toolu_x")]
    assert all(re.fullmatch(r"[a-zA-Z0-9_-]{1,64}", i) for i in ids)
    assert len(set(ids)) == len(ids) and custom_id_of("r", "model:0") == ids[0]


def test_a_model_without_message_batches_is_refused_in_batch_mode(tmp_path: Path) -> None:
    with pytest.raises(RunError, match="batch mode"):
        run_agent("x", client=ScriptedModel([]), store=str(tmp_path / "runs"), workspace=tmp_path, batch_api=True)
    assert list_runs(str(tmp_path / "runs")) == []  # refused before anything is recorded


def test_batch_mode_for_the_demo_model_is_refused_before_anything_is_queued_or_started(tmp_path: Path) -> None:
    """Without a key, run --batch --batch-api queued runs for the demo model that every worker
    then failed, leaving them queued for ever (and run --batch-api started one to fail it)."""
    store, workspace = str(tmp_path / "runs"), str(tmp_path)
    no_key: dict[str, str] = {}
    with pytest.raises(SettingError, match=r"^batch_api must be off for the offline demo model, .*no ANTHROPIC_API_KEY") as told:
        submit_batch([BatchTask("a")], store=store, workspace=workspace, environ=no_key, batch_api=True)
    assert told.value.outcome == "usage"
    with pytest.raises(BatchFileError, match="line 2: batch_api must be off for the offline demo model"):
        submit_batch([BatchTask("a", line=1), BatchTask("b", settings={"batch_api": True}, line=2)], store=store, workspace=workspace, environ=no_key)
    with pytest.raises(SettingError, match=r"demo model, which has no Message Batches API, not True$"):
        submit_batch([BatchTask("a")], store=store, workspace=workspace, demo=True, environ={"ANTHROPIC_API_KEY": "k"}, batch_api=True)
    with pytest.raises(SettingError, match="batch_api must be off"):
        prepare_run("x", values={"batch_api": True, "workspace": workspace}, environ=no_key)
    assert list_runs(store) == []
    queued = submit_batch([BatchTask("a")], store=store, workspace=workspace, environ=no_key)  # without batch mode, as ever
    assert read_summary(queued.run_ids[0], store).settings["model_kind"] == "demo"


def test_a_gatherer_waits_for_every_member_or_its_window() -> None:
    created: list[list[str]] = []

    class Batches:
        def create(self, requests: Any) -> str:
            created.append([c for c, _ in requests])
            return f"b{len(created)}"

        def retrieve(self, batch_id: str) -> dict[str, Any]:
            return {"processing_status": "ended"}

        def results(self, batch_id: str) -> dict[str, Any]:
            return {}

        def created_between(self, start: float, end: float) -> list[str]:
            return []

    gatherer = Gatherer(Batches(), window=30.0)
    got: dict[str, str] = {}
    with gatherer.member(), gatherer.member():
        first = threading.Thread(target=lambda: got.update(a=gatherer.submit("a", {})))
        first.start()
        first.join(0.3)
        assert created == [] and first.is_alive()  # the other member may still come
        got["b"] = gatherer.submit("b", {})
        first.join(5)
    assert created == [["a", "b"]] and got == {"a": "b1", "b": "b1"}
    quick = Gatherer(Batches(), window=0.05)
    with quick.member(), quick.member():
        assert quick.submit("c", {}) == "b2"  # the window passed: sent without the other member
    assert quick.result("b2", "c") == {"type": "missing"}


def test_a_run_that_ends_without_taking_its_result_leaves_none_kept_and_its_resume_polls_again() -> None:
    """A batch's results were kept until every request sent in it was taken: a run that stopped
    in between (cancelled, crashed, stopped by its budget) left them in memory for good."""
    fetched: list[weakref.ref[Any]] = []

    class Results(dict[str, Any]):  # a dict that a weak reference can follow
        pass

    class Batches:
        created = 0

        def create(self, requests: Any) -> str:
            self.created += 1
            return f"b{self.created}"

        def retrieve(self, batch_id: str) -> dict[str, Any]:
            return {"processing_status": "ended"}

        def results(self, batch_id: str) -> dict[str, Any]:
            got = Results({c: {"type": "succeeded", "message": {"for": c}} for c in ("a", "b")})
            fetched.append(weakref.ref(got))
            return got

        def created_between(self, start: float, end: float) -> list[str]:
            return []

    batches = Batches()
    gatherer = Gatherer(batches, window=30.0)
    with gatherer.member() as a:
        with gatherer.member() as b:
            other = threading.Thread(target=b.submit, args=("b", {}))
            other.start()
            assert a.submit("a", {}) == "b1"
            other.join(5)
        # b stopped without taking its result; a takes its own
        assert gatherer.result("b1", "a")["message"] == {"for": "a"}
        gc.collect()
        assert [r() for r in fetched] == [None], "the batch's results are still kept for a run that ended"
    with gatherer.member():  # b resumed: its log names b1, which is polled again, not sent again
        assert gatherer.result("b1", "b")["message"] == {"for": "b"}
    assert batches.created == 1


def test_submit_batch_with_batch_api_queues_runs_in_batch_mode(tmp_path: Path) -> None:
    handle = submit_batch(
        [BatchTask("first"), BatchTask("second")], store=str(tmp_path / "runs"), workspace=str(tmp_path),
        environ={"ANTHROPIC_API_KEY": "k"}, batch_api=True,
    )  # fmt: skip
    assert [read_summary(r, tmp_path / "runs").settings.get("batch_api") for r in handle.run_ids] == [True, True]

    lines = tmp_path / "tasks.jsonl"
    lines.write_text('{"task": "can wait", "batch_api": true}\n{"task": "cannot wait"}\n{"task": "bad", "batch_api": "yes"}\n')
    with pytest.raises(BatchFileError, match="line 3"):
        read_batch(lines)
    lines.write_text('{"task": "can wait", "batch_api": true}\n{"task": "cannot wait"}\n')
    tasks, _ = read_batch(lines)
    handle = submit_batch(tasks, store=str(tmp_path / "lines"), workspace=str(tmp_path), environ={"ANTHROPIC_API_KEY": "k"})
    assert [read_summary(r, tmp_path / "lines").settings.get("batch_api", False) for r in handle.run_ids] == [True, False]


def test_a_stopping_worker_stops_a_run_waiting_on_its_batch_and_the_next_worker_polls_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with MessagesAPIServer(FunctionScenario(two_turns), batch_delay=float("inf")) as server:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
        monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
        store = str(tmp_path / "runs")
        (tmp_path / "ws").mkdir()
        (run_id,) = submit_batch([BatchTask("wait for me")], store=store, workspace=str(tmp_path / "ws"), batch_api=True).run_ids
        first = ResumeWorker(store, poll=0.1)
        seen: list[Any] = []

        def stop_once_polled() -> None:
            seen.extend(list_runs(store))  # what every listing says while the batch is polled
            first.stop()

        server.once_batch_polled(stop_once_polled)
        assert [t.outcome for t in first.run(once=True)] == ["interrupted"]  # not held for the batch's hours
        ((polled,),) = [[s for s in seen if s.run_id == run_id]]
        batch_id = server.batches.created[0].id
        assert (polled.status, polled.awaiting and polled.awaiting.what) == ("running", f"Message Batch {batch_id}"), polled
        assert polled.awaiting is not None and polled.awaiting.step_id == "model:0"
        assert read_summary(run_id, store).awaiting is None  # the mark went with the stopped worker's lease
        assert (read_summary(run_id, store).error or "").startswith(STOPPED_BY_WORKER)
        server.batches.delay = 0.0
        with opened(store) as runs:  # the first worker's claim, which a worker in another process never sees
            release_claims(runs, [run_id])
        assert [t.outcome for t in ResumeWorker(store, poll=0.1).run(once=True)] == ["completed"]
        assert [len(b.requests) for b in server.batches.created] == [1, 1] and server.requests_to("messages") == []


def test_a_run_keeps_the_mode_it_recorded_whatever_a_rerun_asks(tmp_path: Path) -> None:
    with MessagesAPIServer(FunctionScenario(two_turns), batch_delay=float("inf")) as server:
        stop = StopSignal()
        (tmp_path / "ws").mkdir()

        server.once_batch_polled(stop.request)
        client = AnthropicModel(api_key="test-key", base_url=server.url)
        common: dict[str, Any] = {"run_id": "kept", "client": client, "model": MODEL, "store": str(tmp_path / "runs"), "workspace": tmp_path / "ws"}
        with pytest.raises(RunStopped):
            run_agent("look around", hooks=RunHooks(stop=stop), batch_api=True, **common)
        server.batches.delay = 0.0
        again = run_agent("look around", **common)  # no batch_api: the recorded mode holds
        assert again.status == "completed"
        assert [len(b.requests) for b in server.batches.created] == [1, 1] and server.requests_to("messages") == []


def test_runs_gather_per_endpoint_and_credential() -> None:
    def gatherer(key: str, url: str = "http://127.0.0.1:9") -> Gatherer:
        model = AnthropicModel(api_key=key, base_url=url)
        return gatherer_for(endpoint_of(model), model.message_batches)

    assert gatherer("key-a") is gatherer("key-a")
    assert gatherer("key-a") is not gatherer("key-b")  # a batch is polled with the key that made it
    assert gatherer("key-a") is not gatherer("key-a", "http://127.0.0.1:10")


class CrashAfterCreate:
    """Message Batches that die the moment a batch exists: before its id can be recorded."""

    account = "crashes-after-create"

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def create(self, requests: Any) -> str:
        self.inner.create(requests)
        raise SimulatedCrash("killed between the batch's creation and its record")

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


class CrashingModel(AnthropicModel):
    def message_batches(self) -> Any:
        return CrashAfterCreate(super().message_batches())


def test_a_step_killed_between_the_batch_and_its_record_finds_its_batch_and_sends_nothing_again(tmp_path: Path) -> None:
    with MessagesAPIServer(FunctionScenario(two_turns)) as server:
        common: dict[str, Any] = {"run_id": "window", "model": MODEL, "store": str(tmp_path / "runs"), "workspace": tmp_path, "batch_api": True}
        with pytest.raises(SimulatedCrash):
            run_agent("look around", client=CrashingModel(api_key="test-key", base_url=server.url), **common)
        (first,) = server.batches.created
        said = [e.decision for e in read_run("window", tmp_path / "runs").events if isinstance(e, Decision)]
        assert said == [GATHERING]  # the window: sent, and no batch recorded
        result = run_agent("look around", client=AnthropicModel(api_key="test-key", base_url=server.url), **common)
        assert result.status == "completed"
        assert [len(b.requests) for b in server.batches.created] == [1, 1]  # found in the first batch, not sent again
        assert server.requests_to("batch_list") and server.requests_to("messages") == []
        step = read_run("window", tmp_path / "runs").steps[0]
        assert step.result["batch"]["id"] == first.id
        assert [d.decision for d in step.decisions] == [GATHERING, IN_BATCH + first.id]



def test_a_list_of_batches_that_fails_for_a_while_is_retried_and_past_the_policy_sends_nothing(tmp_path: Path) -> None:
    """The look for a crashed step's batch gave up at its list's first 529 and sent the request
    again: a second batch, paid twice, for not knowing."""
    from nb_durable.agent.models.retry import RetryPolicy

    with MessagesAPIServer(FunctionScenario(two_turns)) as server:
        common: dict[str, Any] = {
            "run_id": "storm", "model": MODEL, "store": str(tmp_path / "runs"), "workspace": tmp_path, "batch_api": True,
            "retry": RetryPolicy(max_attempts=3, base_delay=0.01, jitter=0.0), "hooks": RunHooks(sleep=lambda s: None),
        }  # fmt: skip
        with pytest.raises(SimulatedCrash):
            run_agent("look around", client=CrashingModel(api_key="test-key", base_url=server.url), **common)
        server.batches.list_faults = [(529, "overloaded_error")] * 3  # the whole policy
        client = AnthropicModel(api_key="test-key", base_url=server.url)
        with pytest.raises(RetriesExhaustedError, match=r"after 3 attempts .*529 .*listing batches.* resume it with resume_agent\('storm'\) when"):
            run_agent("look around", client=client, **common)
        assert read_summary("storm", tmp_path / "runs").status == "failed"
        assert len(server.batches.created) == 1 and server.requests_to("messages") == []  # nothing sent again
        server.batches.list_faults = [(529, "overloaded_error")] * 2  # a storm that passes
        assert resume_agent("storm", client=client, store=common["store"], hooks=common["hooks"]).status == "completed"
        assert [len(b.requests) for b in server.batches.created] == [1, 1]  # found in the first, not sent again
        assert server.requests_to("messages") == []
        step = read_run("storm", tmp_path / "runs").steps[0]
        assert step.result["batch"]["id"] == server.batches.created[0].id
        assert len(step.attempts) == 5  # each failed list recorded as an attempt of the step

def test_a_step_stopped_before_its_request_went_anywhere_sends_it_without_looking_around(tmp_path: Path) -> None:
    with MessagesAPIServer(FunctionScenario(two_turns)) as server:
        common: dict[str, Any] = {"run_id": "early", "model": MODEL, "store": str(tmp_path / "runs"), "workspace": tmp_path, "batch_api": True}
        client = AnthropicModel(api_key="test-key", base_url=server.url)
        with pytest.raises(SimulatedCrash):
            run_agent("look around", client=client, hooks=RunHooks(before_step=CrashAt(1)), **common)
        assert server.requests == [] and read_run("early", tmp_path / "runs").steps[0].step_id == "model:0"
        assert run_agent("look around", client=client, **common).status == "completed"
        assert server.requests_to("batch_list") == [] and [len(b.requests) for b in server.batches.created] == [1, 1]


@pytest.mark.parametrize("lost", [None, (500, "api_error")], ids=["dropped", "500"])
def test_a_batch_made_whose_answer_was_lost_is_found_not_made_again(tmp_path: Path, lost: Any) -> None:
    """The create call's answer lost (the connection dropped, a 500) after the API made the
    batch: the retry made a second batch holding the same request, both ran, and the call was
    paid twice in one session. Now the retry first looks for the request in the batches made
    since, as a resume does, and sends it again only if none holds it."""
    from nb_durable.agent.models.retry import RetryPolicy

    with MessagesAPIServer(FunctionScenario(two_turns)) as server:
        server.batches.lost_creations = [lost]
        result = run_agent(
            "look around", run_id="lost", client=AnthropicModel(api_key="test-key", base_url=server.url), model=MODEL,
            store=str(tmp_path / "runs"), workspace=tmp_path, batch_api=True, hooks=RunHooks(sleep=lambda s: None),
            retry=RetryPolicy(max_attempts=3, base_delay=0.01, jitter=0.0),
        )  # fmt: skip
        assert result.status == "completed", result.detail
        custom_ids = [c for b in server.batches.created for c, _ in b.requests]
        assert len(custom_ids) == len(set(custom_ids)) == 2, f"a request was sent in two batches: {custom_ids}"
        assert server.requests_to("messages") == []
        step = read_run("lost", tmp_path / "runs").steps[0]
        assert step.result["batch"]["id"] == server.batches.created[0].id
        assert len(step.attempts) == 1  # the lost answer, recorded as a failed attempt
