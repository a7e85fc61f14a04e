"""run_step's semantics on one store (JSONL): identity, in-doubt policies, results, durability."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from nb_durable import (
    DivergenceError,
    EventLog,
    InDoubtError,
    OutcomeUnknown,
    StepRecord,
    current_step,
    read_run,
    run_step,
)
from nb_durable.errors import InvalidStepIdError, SettingError, StepResultError


def crash_during(log: EventLog, step_id: str, effect: str = "external") -> None:
    """Leave ``step_id`` started and never completed, as a killed process would."""

    def die() -> None:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_step(log, step_id, die, effect=effect)  # type: ignore[arg-type]
    log.close()


def test_reference_layout_is_runs_folder_with_one_jsonl_per_run(in_tmp: Path) -> None:
    with EventLog("ref") as log:
        run_step(log, "model:0", lambda: {"text": "hi"})
    lines = (in_tmp / "runs" / "ref.jsonl").read_text().splitlines()
    events = [json.loads(line) for line in lines]
    assert [e["kind"] for e in events] == ["run_started", "step_completed"]
    assert all(e["v"] == 1 and "crc" in e for e in events)
    assert events[1]["step"] == "model:0" and events[1]["result"] == {"text": "hi"}


def test_divergent_step_id_names_run_position_and_both_ids(tmp_path: Path) -> None:
    with EventLog("div", tmp_path) as log:
        run_step(log, "a", lambda: 1)
        run_step(log, "b", lambda: 2)
    with EventLog("div", tmp_path) as log:
        run_step(log, "a", lambda: 1)
        with pytest.raises(DivergenceError) as info:
            run_step(log, "c", lambda: 3)
    err = info.value
    assert (err.run_id, err.position, err.recorded, err.requested) == ("div", 1, "b", "c")
    assert "fork('div', 'new-id', at=1)" in str(err)


def test_a_divergence_at_the_first_step_offers_no_fork_of_nothing(tmp_path: Path) -> None:
    # A fork at=0 keeps no step: the way on is a new run, or the same id recorded again.
    with EventLog("first", tmp_path) as log:
        run_step(log, "a", lambda: 1)
    with EventLog("first", tmp_path) as log, pytest.raises(DivergenceError) as info:
        run_step(log, "b", lambda: 2)
    assert "fork(" not in str(info.value)
    assert "nothing to keep: start a new run, or delete 'first' (nb-durable delete)" in str(info.value)


def test_divergent_request_hash_is_caught(tmp_path: Path) -> None:
    with EventLog("hash", tmp_path) as log:
        run_step(log, "fetch", lambda: 1, request={"url": "a"})
    with EventLog("hash", tmp_path) as log:
        with pytest.raises(DivergenceError, match="different request"):
            run_step(log, "fetch", lambda: 1, request={"url": "b"})
    with EventLog("hash", tmp_path) as log:
        assert run_step(log, "fetch", lambda: 2, request={"url": "a"}) == 1


@pytest.mark.parametrize("given", ["Not-Hex!", "v2", "ABC", "a\"b"])
def test_a_request_hash_that_is_not_hex_pins_the_step_as_a_hex_one_does(tmp_path: Path, given: str) -> None:
    # It was written as given, and a reader takes only hex for a hash: read back as none, so
    # a replay with any other request got the recorded result without a word.
    with EventLog("pinned", tmp_path) as log:
        run_step(log, "fetch", lambda: 1, request_hash=given)
    (line,) = [json.loads(raw) for raw in (tmp_path / "pinned.jsonl").read_text().splitlines()[1:]]
    assert set(line["hash"]) <= set("0123456789abcdef"), line
    with EventLog("pinned", tmp_path) as log:
        with pytest.raises(DivergenceError, match="different request"):
            run_step(log, "fetch", lambda: 2, request_hash=given + "x")
    with EventLog("pinned", tmp_path) as log:
        assert run_step(log, "fetch", lambda: 2, request_hash=given) == 1
    with EventLog("other", tmp_path) as log, pytest.raises(SettingError, match="request_hash"):
        run_step(log, "fetch", lambda: 2, request_hash=7)  # type: ignore[arg-type]


def test_step_ids_are_unique_within_a_run(tmp_path: Path) -> None:
    with EventLog("dupe", tmp_path) as log:
        run_step(log, "a", lambda: 1)
        with pytest.raises(InvalidStepIdError, match="already used at position 0"):
            run_step(log, "a", lambda: 2)
        with pytest.raises(InvalidStepIdError):
            run_step(log, "", lambda: 2)


def test_non_json_result_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    with EventLog("types", tmp_path) as log:
        with pytest.raises(StepResultError, match="'bad'.*set.*Nothing was recorded") as info:
            run_step(log, "bad", lambda: {1, 2})
        assert isinstance(info.value, TypeError)
        with pytest.raises(StepResultError, match="NaN|JSON"):
            run_step(log, "nan", lambda: float("nan"))
        assert run_step(log, "good", lambda: 1) == 1
    assert [s.step_id for s in read_run("types", tmp_path).steps] == ["good"]


def test_live_results_equal_replayed_results(tmp_path: Path) -> None:
    with EventLog("same", tmp_path) as log:
        live = run_step(log, "t", lambda: {"pair": (1, 2), 3: "int key"})
    with EventLog("same", tmp_path) as log:
        replayed = run_step(log, "t", lambda: None)
    assert live == replayed == {"pair": [1, 2], "3": "int key"}


@pytest.mark.parametrize("effect", ["pure", "idempotent"])
def test_interrupted_pure_and_idempotent_steps_simply_run_again(tmp_path: Path, effect: str) -> None:
    crash_during(EventLog("again", tmp_path), "s", effect)
    with EventLog("again", tmp_path, in_doubt="fail") as log:
        assert run_step(log, "s", lambda: "ran", effect=effect) == "ran"  # type: ignore[arg-type]


def test_in_doubt_fail_policy_explains_the_choices(tmp_path: Path) -> None:
    crash_during(EventLog("fail", tmp_path), "charge")
    with EventLog("fail", tmp_path) as log:
        with pytest.raises(InDoubtError, match="in_doubt='rerun'.*in_doubt='skip'") as info:
            run_step(log, "charge", lambda: "again", effect="external")
    assert info.value.step_id == "charge"
    assert read_run("fail", tmp_path).summary.status == "in_doubt"


def test_in_doubt_rerun_policy_runs_it_again_and_records_why(tmp_path: Path) -> None:
    crash_during(EventLog("rerun", tmp_path), "charge")
    with EventLog("rerun", tmp_path, in_doubt="rerun") as log:
        assert run_step(log, "charge", lambda: "again", effect="external") == "again"
    decision = [e for e in read_run("rerun", tmp_path).events if e.kind == "decision"]
    assert [(d.decision, d.by) for d in decision] == [("rerun", "policy")]  # type: ignore[attr-defined]


def test_a_person_decides_once_and_replay_never_asks_again(tmp_path: Path) -> None:
    crash_during(EventLog("ask", tmp_path), "deploy")
    asked: list[StepRecord] = []

    def ask(record: StepRecord) -> Any:
        asked.append(record)
        return ("skip", "person", "it printed once")

    for _ in range(3):
        with EventLog("ask", tmp_path, in_doubt=ask) as log:
            out = run_step(log, "deploy", lambda: pytest.fail("must not run"), effect="external")
            assert isinstance(out, OutcomeUnknown) and "its process died, or its store refused the write" in out.message
    assert len(asked) == 1 and asked[0].step_id == "deploy" and asked[0].state == "in_doubt"
    decisions = [e for e in read_run("ask", tmp_path).events if e.kind == "decision"]
    assert [(d.decision, d.by, d.note) for d in decisions] == [("skip", "person", "it printed once")]  # type: ignore[attr-defined]


def test_a_check_guard_settles_doubt_from_the_world(tmp_path: Path) -> None:
    sent: list[str] = []
    crash_during(EventLog("guard", tmp_path), "email")
    sent.append("guard:email")  # the effect did happen before the crash
    with EventLog("guard", tmp_path) as log:
        out = run_step(
            log,
            "email",
            lambda: pytest.fail("the check found it; no resend"),
            effect="external",
            check=lambda: "found" if current_step().key in sent else None,  # type: ignore[union-attr]
        )
    assert out == "found"
    crash_during(EventLog("guard2", tmp_path), "email")
    with EventLog("guard2", tmp_path) as log:
        out = run_step(log, "email", lambda: "sent", effect="external", check=lambda: None)
    assert out == "sent"


def test_every_step_gets_a_stable_idempotency_key(tmp_path: Path) -> None:
    keys: list[str] = []

    def effect() -> str:
        ctx = current_step()
        assert ctx is not None
        keys.append(ctx.key)
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_step(EventLog("keys", tmp_path), "push", effect, effect="external")
    with EventLog("keys", tmp_path, in_doubt="rerun") as log:
        run_step(log, "push", lambda: keys.append(current_step().key), effect="external")  # type: ignore[union-attr]
    assert keys == ["keys:push", "keys:push"]
    assert read_run("keys", tmp_path).events[1].key == "keys:push"  # type: ignore[attr-defined]
    assert current_step() is None


def test_a_step_that_raises_is_recorded_as_failed_and_runs_again(tmp_path: Path) -> None:
    attempts: list[int] = []

    def flaky() -> str:
        attempts.append(1)
        if len(attempts) == 1:
            raise ConnectionError("network down")
        return "ok"

    with EventLog("flaky", tmp_path) as log:
        with pytest.raises(ConnectionError):
            run_step(log, "fetch", flaky, effect="external")
    step = read_run("flaky", tmp_path).steps[0]
    assert step.state == "failed"
    assert [(a.attempt, a.error, a.message) for a in step.attempts] == [(1, "ConnectionError", "network down")]
    with EventLog("flaky", tmp_path) as log:
        assert run_step(log, "fetch", flaky, effect="external") == "ok"
    assert len(attempts) == 2


def test_retries_inside_a_step_are_recorded_as_attempts(tmp_path: Path) -> None:
    def with_retries() -> str:
        ctx = current_step()
        assert ctx is not None
        ctx.record_attempt_failed(1, "OverloadedError", status=529, delay=0.5)
        ctx.record_attempt_failed(2, "OverloadedError", status=529, delay=1.0)
        return "third time"

    with EventLog("retry", tmp_path) as log:
        run_step(log, "model:0", with_retries, effect="idempotent")
    step = read_run("retry", tmp_path).steps[0]
    assert [(a.attempt, a.status, a.delay) for a in step.attempts] == [(1, 529, 0.5), (2, 529, 1.0)]
    assert step.state == "completed"


def test_listeners_hear_live_and_replayed_steps(tmp_path: Path) -> None:
    heard: list[tuple[str, bool]] = []
    with EventLog("listen", tmp_path) as log:
        log.listeners.append(lambda e, replayed: heard.append((e.kind, replayed)))
        run_step(log, "a", lambda: 1)
    with EventLog("listen", tmp_path) as log:
        log.listeners.append(lambda e, replayed: heard.append((e.kind, replayed)))
        run_step(log, "a", lambda: 1)
        run_step(log, "b", lambda: 1)
    assert heard == [
        ("run_started", False),
        ("step_completed", False),
        ("step_completed", True),
        ("step_completed", False),
    ]


@pytest.mark.parametrize(
    ("durability", "synced_kinds"),
    [
        (
            "full",
            ["run_started", "step_started", "step_completed", "step_completed", "step_completed", "run_finished"],
        ),
        ("process", ["step_started"]),
        ("none", []),
    ],
)
def test_durability_decides_which_writes_are_fsynced(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, durability: str, synced_kinds: list[str]
) -> None:
    synced: list[str] = []
    real_fsync = os.fsync
    path = tmp_path / "sync.jsonl"

    def spy(fd: int) -> None:
        if os.path.exists(path) and os.fstat(fd).st_ino == os.stat(path).st_ino:
            synced.append(json.loads(path.read_bytes().splitlines()[-1])["kind"])
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", spy)
    with EventLog("sync", tmp_path, durability=durability) as log:  # type: ignore[arg-type]
        run_step(log, "send", lambda: 1, effect="external")
        run_step(log, "think", lambda: 2)
        run_step(log, "model", lambda: 3, effect="idempotent")
        log.finish_run("completed")
    assert synced == synced_kinds


def test_finishing_a_replayed_run_writes_nothing(tmp_path: Path) -> None:
    for _ in range(2):
        with EventLog("fin", tmp_path) as log:
            run_step(log, "a", lambda: 1)
            log.finish_run("completed", output="a")
    assert len(read_run("fin", tmp_path).events) == 3


def test_a_finished_run_can_go_on_and_its_status_follows(tmp_path: Path) -> None:
    with EventLog("on", tmp_path) as log:
        run_step(log, "a", lambda: 1)
        log.finish_run("failed", error="401")
    assert read_run("on", tmp_path).summary.status == "failed"
    with EventLog("on", tmp_path) as log:
        run_step(log, "a", lambda: 1)
        run_step(log, "b", lambda: 2)
        assert log.status == "running"
        log.finish_run("completed")
    assert read_run("on", tmp_path).summary.status == "completed"


def test_a_record_without_its_result_has_the_steps_id_and_decisions_and_never_parses_the_result(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from nb_durable.core import codec, history

    with EventLog("r", str(tmp_path)) as log:
        def call() -> dict[str, str]:  # a fallback's switch is decided inside the model step
            log.record_decision("model:0", "switched", by="fallback", note="to claude-b")
            return {"message": "x" * 1000}

        run_step(log, "model:0", call, effect="idempotent")
        whole = log.record_at(0)
        parsed: list[bytes] = []

        def decode(line: bytes) -> Any:
            parsed.append(line)
            return codec.decode_event(line)

        monkeypatch.setattr(history, "decode_event", decode)
        light = log.record_at(0, result=False)
    assert not any(b'"step_completed"' in line for line in parsed), "the result line was parsed"
    assert (light.step_id, light.state, light.decisions) == (whole.step_id, whole.state, whole.decisions)
    assert [d.decision for d in light.decisions] == ["switched"]
    assert light.result is None and light.completed_at is None and whole.result == {"message": "x" * 1000}


def test_the_step_just_recorded_is_read_from_what_it_handed_back_and_equals_its_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from nb_durable.core import codec, history

    parsed: list[bytes] = []

    def decode(line: bytes) -> Any:
        parsed.append(line)
        return codec.decode_event(line)

    monkeypatch.setattr(history, "decode_event", decode)
    with EventLog("r", str(tmp_path)) as log:
        run_step(log, "a", lambda: {"n": 1})
        run_step(log, "b", lambda: {"pair": (1, 2)}, effect="idempotent")  # a tuple: replay hands back a list
        del parsed[:]
        last, earlier = log.record_at(1), log.record_at(0)
    results = [line for line in parsed if b'"step_completed"' in line]
    assert len(results) == 1 and b'"a"' in results[0], "the last result's line was parsed back (or the earlier one was not)"
    again = read_run("r", tmp_path)
    assert (last.result, earlier.result) == ({"pair": [1, 2]}, {"n": 1})
    assert [last, earlier] == [again.steps[1], again.steps[0]]
