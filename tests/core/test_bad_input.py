"""Bad input gets a clear error that says what to do, and loses nothing already recorded."""

from __future__ import annotations

import os
import re
import warnings
from collections.abc import Callable
from pathlib import Path

import pytest

from nb_durable import (
    EventLog,
    RunError,
    RunNotFoundError,
    StoreError,
    list_runs,
    open_store,
    read_run,
    run_step,
)
from nb_durable.errors import LogCorruptedError, SettingError, StoreNameError


def test_a_root_that_cannot_be_a_folder_is_a_store_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    with pytest.raises(StoreError, match="cannot create the runs folder .*Pass root="):
        EventLog("x", blocker / "runs")
    with pytest.raises(StoreError, match="is a file, not a runs folder"):
        EventLog("x", blocker)


@pytest.mark.parametrize("existing", [True, False])
def test_a_path_of_the_wrong_kind_says_what_is_there_not_that_nothing_is(tmp_path: Path, existing: bool) -> None:
    """A folder named as a SQLite file was 'a file that does not exist' to a reader and SQLite's
    'unable to open database file' to a writer; a file named by jsonl:/// was 'a folder that does
    not exist', and each run's 'Not a directory' as a batch was queued into it."""
    (tmp_path / "runs.db").mkdir()
    (tmp_path / "file").write_text("not a folder")
    for spec, said in (
        (tmp_path / "runs.db", "runs.db is a folder, not a SQLite file"),
        (f"sqlite:///{tmp_path / 'runs.db'}", "runs.db is a folder, not a SQLite file"),
        (f"jsonl://{tmp_path / 'file'}", "file is a file, not a runs folder"),
    ):
        with pytest.raises(StoreNameError, match=said):
            open_store(spec, existing=existing)


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("ftp://host/runs", "unknown store 'ftp://host/runs'"),
        ("sqlite://", "names no file"),
        ("", "the store is empty"),
    ],
)
def test_bad_store_urls_say_which_forms_work(url: str, message: str) -> None:
    with pytest.raises(StoreError, match=message):
        open_store(url)


def test_a_sqlite_url_on_a_file_that_is_not_sqlite(tmp_path: Path) -> None:
    bogus = tmp_path / "notes.db"
    bogus.write_text("just text, long enough to not look like an empty database file" * 10)
    with pytest.raises(StoreError, match="cannot open the SQLite store .*notes.db"):
        open_store(f"sqlite:///{bogus}")


def test_a_foreign_file_in_the_runs_folder(tmp_path: Path) -> None:
    with EventLog("mine", tmp_path) as log:
        run_step(log, "a", lambda: 1)
    (tmp_path / "theirs.jsonl").write_text('{"some": "other tool"}\n{"more": 1}\n')
    (tmp_path / "README.txt").write_text("not a log at all")
    with pytest.raises(LogCorruptedError, match="theirs.jsonl is not an nb_durable log.*another tool") as caught:
        EventLog("theirs", tmp_path)
    # Each reason reads "it ..." or "its ...": after a bare "line 1" it read "line 1 it does not end with".
    assert "theirs.jsonl is not an nb_durable log: at line 1, it does not end with an nb_durable checksum. " in str(caught.value)
    with pytest.warns(UserWarning, match="skipped .*theirs.jsonl"):
        assert [s.run_id for s in list_runs(tmp_path)] == ["mine"]
    assert (tmp_path / "theirs.jsonl").read_text().startswith('{"some"')


def test_a_log_of_ours_damaged_at_line_1_is_a_damaged_run_not_another_tool_s_file(tmp_path: Path) -> None:
    """It said "not an nb_durable log ... belongs to another tool" of a run's own log whose first
    line had a bit flipped, with no advice for the person's own damaged run."""
    with EventLog("mine", tmp_path) as log:
        run_step(log, "a", lambda: 1)
    path = tmp_path / "mine.jsonl"
    flipped = bytearray(path.read_bytes())
    flipped[flipped.index(b"run_started")] ^= 0x20  # one bit of the first line: its checksum fails
    path.write_bytes(bytes(flipped))
    with pytest.raises(LogCorruptedError) as caught:
        read_run("mine", tmp_path)
    said = str(caught.value)
    assert said.startswith("run 'mine' is damaged at line 1 of "), said
    assert "its checksum does not match its bytes" in said and "another tool" not in said
    assert "Restore the file from a copy" in said and "start the task again as a new run" in said
    assert "fork(" not in said, "a fork cannot keep anything of a log whose first line is lost"


def test_an_empty_log_file_is_named_and_can_be_started_again(tmp_path: Path) -> None:
    (tmp_path / "blank.jsonl").write_bytes(b"")
    with pytest.raises(RunNotFoundError, match="empty log .*blank.jsonl"):
        read_run("blank", tmp_path)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert list_runs(tmp_path) == []
    with EventLog("blank", tmp_path) as log:
        assert run_step(log, "a", lambda: 1) == 1
    assert read_run("blank", tmp_path).summary.steps == 1


def test_listing_a_missing_folder_is_empty_not_an_error(tmp_path: Path) -> None:
    assert list_runs(tmp_path / "never-made") == []


def test_fork_at_a_position_the_run_does_not_have(tmp_path: Path) -> None:
    from nb_durable import fork

    with EventLog("short", tmp_path) as log:
        run_step(log, "a", lambda: 1)
    with pytest.raises(SettingError, match="at of a fork of run 'short', which has 1 step, must be a whole number from 0 to 1, not 5") as bad_at:
        fork("short", "long", at=5, root=tmp_path)
    fork("short", "copy", at=1, root=tmp_path).close()
    with pytest.raises(RunError, match="already exists") as taken:
        fork("short", "copy", at=1, root=tmp_path)
    # Mistakes in what was asked: the notebook shows the message alone, the CLI exits 2 (it was 1).
    assert bad_at.value.outcome == taken.value.outcome == "usage"


@pytest.mark.parametrize("bad", [{"in_doubt": "maybe"}, {"durability": "sometimes"}])
def test_bad_options_are_refused_with_the_choices(tmp_path: Path, bad: dict[str, str]) -> None:
    # In the one error tree (a ValueError too): they were bare ValueErrors, which the front
    # ends' mapping of an error to its outcome (the CLI's exit 2) did not know.
    with pytest.raises(SettingError, match="must be") as refused:
        EventLog("opts", tmp_path, **bad)  # type: ignore[arg-type]
    assert refused.value.outcome == "usage" and isinstance(refused.value, ValueError)
    assert list_runs(tmp_path) == []


def test_a_bad_effect_status_or_in_doubt_verdict_names_the_run_and_step(tmp_path: Path) -> None:
    from nb_durable.core.whole_runs.retention import prune_runs

    with EventLog("opts", tmp_path) as log:
        with pytest.raises(SettingError, match="effect of step 'send' of run 'opts' must be 'pure', 'idempotent' or 'external', not 'sideways'"):
            run_step(log, "send", lambda: 1, effect="sideways")  # type: ignore[arg-type]
        with pytest.raises(SettingError, match="status of run 'opts' must be one of completed, .* not 'done'"):
            log.finish_run("done")  # type: ignore[arg-type]
        run_step(log, "post", lambda: "ok", effect="external")
    # A step in doubt, settled by a callable that answers what no policy is.
    path = tmp_path / "opts.jsonl"
    path.write_bytes(b"\n".join(path.read_bytes().splitlines()[:-1]) + b"\n")
    with EventLog("opts", tmp_path, in_doubt=lambda record: "maybe") as log:  # type: ignore[arg-type,return-value]
        with pytest.raises(SettingError, match="in_doubt callable's decision on step 'post' of run 'opts' must be 'rerun', 'skip' or 'fail'"):
            run_step(log, "post", lambda: "ok", effect="external")
    assert read_run("opts", tmp_path).steps[0].state == "in_doubt"
    with pytest.raises(SettingError, match="older_than must not be negative"):
        prune_runs(-1, tmp_path)


def test_the_intact_prefix_of_a_damaged_run_can_be_forked_as_the_error_advises(tmp_path: Path) -> None:
    from nb_durable import fork

    with EventLog("hurt", tmp_path) as log:
        for name in "abcd":
            run_step(log, name, lambda name=name: name)  # type: ignore[misc]  # mypy cannot infer a lambda with a default argument
    path = tmp_path / "hurt.jsonl"
    path.write_bytes(path.read_bytes().replace(b'"result":"c"', b'"result":"C"'))
    with pytest.raises(LogCorruptedError, match=r"fork the intact prefix \(its first 2 steps\) into a new run with fork\('hurt', new_id, at=2\)"):
        read_run("hurt", tmp_path)
    with pytest.raises(SettingError, match="from 0 to 2"):
        fork("hurt", "saved", at=3, root=tmp_path)
    with fork("hurt", "saved", at=2, root=tmp_path) as log:
        assert [run_step(log, n, lambda n=n: n.upper()) for n in "abcd"] == ["a", "b", "C", "D"]  # type: ignore[misc]  # mypy cannot infer a lambda with a default argument


def test_a_fork_of_a_damaged_run_keeps_no_step_whose_result_is_the_damaged_line(tmp_path: Path) -> None:
    """Kept, a step with its intent whole and its result damaged would look in flight in the
    fork, and a tool that had run would run again (or be in doubt)."""
    from nb_durable import fork

    with EventLog("hurt", tmp_path) as log:
        run_step(log, "a", lambda: "a")
        run_step(log, "charge", lambda: "charged", effect="external")  # an intent line, then its result
        run_step(log, "b", lambda: "b")  # so the damage is not the last line, which a crash can tear
    path = tmp_path / "hurt.jsonl"
    path.write_bytes(path.read_bytes().replace(b'"result":"charged"', b'"result":"chargeD"'))
    with pytest.raises(SettingError, match=r"holds 1 step whole before its damage at line 4, must be a whole number from 0 to 1, not 2"):
        fork("hurt", "saved", at=2, root=tmp_path)
    fork("hurt", "saved", at=1, root=tmp_path).close()
    assert [s.step_id for s in read_run("saved", tmp_path).steps] == ["a"]


def test_a_run_whose_writer_has_recorded_nothing_yet_is_not_called_abandoned(tmp_path: Path) -> None:
    from nb_durable.core.stores import open_store

    store = open_store(str(tmp_path))
    writer = store.open_writer("starting")
    try:
        (tmp_path / "starting.jsonl").write_bytes(b"")  # made, with run_started not yet in it
        with pytest.raises(RunNotFoundError) as raised:
            read_run("starting", tmp_path)
        message = str(raised.value)
        assert f"pid {os.getpid()}" in message and "again in a moment" in message
        assert "delete" not in message, "never advise deleting a log that is being written"
    finally:
        writer.close()
        store.close()


def test_a_run_looked_up_in_a_folder_that_does_not_exist_says_the_folder_is_missing(tmp_path: Path) -> None:
    """It said "It has no runs yet", as of an empty store, which hides a mistyped store name."""
    with pytest.raises(RunNotFoundError, match=r"run 'r1' is not there: there is no store at the folder .*typo: that folder does not exist") as raised:
        read_run("r1", tmp_path / "typo")
    assert "no runs yet" not in str(raised.value)
    assert not (tmp_path / "typo").exists(), "looking made nothing"
    (tmp_path / "empty").mkdir()
    with pytest.raises(RunNotFoundError, match="It has no runs yet"):
        read_run("r1", tmp_path / "empty")


@pytest.mark.parametrize("result", [None, "[1,"])
def test_a_checksummed_result_line_without_a_result_is_damage_named_by_line(tmp_path: Path, result: str | None) -> None:
    # A line another tool or a bug wrote, checksum and all: replay raised KeyError or a bare JSONDecodeError.
    import zlib

    from nb_durable.core.codec import encode_event

    with EventLog("forged", tmp_path) as log:
        run_step(log, "a", lambda: 1)
        run_step(log, "b", lambda: 2)
    path = tmp_path / "forged.jsonl"
    lines = path.read_bytes().splitlines(keepends=True)
    if result is None:
        lines[2] = encode_event(2, 1.0, "step_completed", {"step": "b", "ms": 0.1})
    else:
        raw = b'{"v":1,"seq":2,"kind":"step_completed","ts":1.0,"step":"b","result":' + result.encode() + b',"ms":0.1'
        lines[2] = b'%s,"crc":"%08x"}\n' % (raw, zlib.crc32(raw))
    path.write_bytes(b"".join(lines))
    damaged = r"run 'forged' is damaged at line 3 of .*forged.jsonl: it(s step_completed event has no result| is not JSON)"
    if result is None:  # a missing field is seen as the log is read
        with pytest.raises(LogCorruptedError, match=damaged):
            EventLog("forged", tmp_path)
        return
    with EventLog("forged", tmp_path) as log:  # a result is parsed only when replay asks for it
        assert run_step(log, "a", lambda: 0) == 1
        with pytest.raises(LogCorruptedError, match=damaged):
            run_step(log, "b", lambda: 0)


@pytest.mark.parametrize(
    ("store", "where"),
    [("~/runs", "runs/home.jsonl"), ("~/runs.db", "runs.db"), ("sqlite:///~/runs.db", "runs.db"), ("jsonl://~/runs", "runs/home.jsonl"), ("file://~/runs", "runs/home.jsonl"),
     # sqlite:///~/runs.db's three slashes, which wrote jsonl:///~/runs in a folder '~' at the root:
     ("jsonl:///~/runs", "runs/home.jsonl"), ("file:///~/runs", "runs/home.jsonl")],
)
def test_a_store_under_tilde_is_in_the_home_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, store: str, where: str) -> None:
    # '~' was taken as it is: a folder named '~' appeared where the process ran.
    home, here = tmp_path / "home", tmp_path / "here"
    home.mkdir()
    here.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.chdir(here)
    with EventLog("home", store) as log:
        run_step(log, "a", lambda: 1)
    assert (home / where).is_file()
    assert list(here.iterdir()) == []
    assert read_run("home", store).steps[0].result == 1


@pytest.mark.parametrize(("store", "advice"), [("memory:", "memory://..."), ("sqlite:runs.db", "sqlite:///runs.db"), ("Postgresql:", "postgresql://...")])
def test_a_store_url_without_its_slashes_is_refused_not_made_a_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, store: str, advice: str) -> None:
    # Taken as a path, it became a folder or SQLite file of that name where the process ran.
    monkeypatch.chdir(tmp_path)
    with pytest.raises(StoreError, match=f"{store!r} is a store URL without its '//': write {advice}"):
        EventLog("typo", store)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    "spec",
    ["runs", "runs.db", "Runs.SQLite3", "sqlite:///runs.db", "SQLite3:///runs.db", "memory://kind", "jsonl:///{tmp}/runs", "file:///{tmp}/runs"],
)
def test_store_kind_names_the_kind_of_store_open_store_opens(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, spec: str) -> None:
    # The worker and its trouble messages ask store_kind without opening; it read the schemes apart from open_store.
    from nb_durable.core.stores import store_kind

    monkeypatch.chdir(tmp_path)
    spec = spec.format(tmp=tmp_path)
    opened = type(open_store(spec)).__name__.removesuffix("Store").lower()
    assert store_kind(spec) == opened
    assert store_kind("postgresql://u@h/db") == store_kind("Postgres://h/db") == "postgresql"


SHAPES = [
    ("run_finished", {"status": "done"}, "its run_finished event's status is 'done', not one of 'completed', 'failed'"),
    ("run_finished", {"status": "failed", "error": 3}, "its run_finished event's error is 3, not a string or null"),
    ("step_started", {"step": "b", "key": "k", "effect": "sometimes"}, "its step_started event's effect is 'sometimes', not one of 'pure'"),
    ("step_started", {"key": "k", "effect": "pure"}, "its step_started event has no step"),
    ("attempt_failed", {"step": "b", "attempt": "1", "error": "E"}, "its attempt_failed event's attempt is '1', not an integer"),
    ("attempt_failed", {"step": "b", "attempt": True, "error": "E"}, "its attempt_failed event's attempt is True, not an integer"),
    ("decision", {"step": "b", "decision": "skip"}, "its decision event has no by"),
    ("step_completed", {"step": "b", "result": 1}, "its step_completed event has no ms"),
    ("step_completed", {"step": "b", "result": {"ms": 1}}, "its step_completed event has no ms"),
    ("step_completed", {"step": "b", "result": 1, "ms": "fast"}, "its step_completed event's ms is 'fast', not a number"),
    ("step_completed", {"step": "b", "hash": 123, "result": 1, "ms": 0.1}, "its step_completed event's hash is 123, not a string or null"),
    ("step_completed", {"step": 5, "result": 1, "ms": 0.1}, "its step_completed event's step is 5, not a string"),
]


@pytest.mark.parametrize("last", [False, True], ids=["inside", "last line"])
@pytest.mark.parametrize(("kind", "fields", "why"), SHAPES, ids=[f"{k} {w.split(chr(39))[0].split()[-2]}" for k, _, w in SHAPES])
def test_a_checksummed_line_of_the_wrong_shape_is_damage_named_by_run_and_line(
    tmp_path: Path, kind: str, fields: dict[str, object], why: str, last: bool
) -> None:
    """Checksum and all, a line a bug or a hand wrote with a status no reader knows, a field of
    the wrong type or none of a required one was read as if it were right (a hash of the wrong
    type was read as no hash: any request replayed the step). Last in the log, it is not a tear."""
    from nb_durable.core.codec import encode_event

    with EventLog("shape", tmp_path) as log:
        for step_id in ("a", "c", "d"):
            run_step(log, step_id, lambda: 1)
    path = tmp_path / "shape.jsonl"
    lines = path.read_bytes().splitlines(keepends=True)
    lines[2] = encode_event(2, 1.0, kind, fields)
    path.write_bytes(b"".join(lines[: 3 if last else None]))
    damaged = rf"run 'shape' is damaged at line 3 of .*shape.jsonl: {re.escape(why)}.*fork\('shape', new_id, at=1\)"
    with pytest.raises(LogCorruptedError, match=damaged):
        read_run("shape", tmp_path)
    with pytest.raises(LogCorruptedError, match=damaged):
        EventLog("shape", tmp_path)
    assert len(path.read_bytes().splitlines()) == (3 if last else 4), "nothing was dropped"


@pytest.mark.parametrize(
    ("record", "setting", "must"),
    [
        (lambda log: log.record_attempt_failed("b", 1, "HTTPError", status="503"), "status", "an integer or null"),
        (lambda log: log.record_decision("b", "approved", by=None), "by", "a string"),  # an approver's Approval(by=None)
        (lambda log: log.record_decision("b", "approved", by="me", note=None), "note", "a string"),
    ],
    ids=["status", "by", "note"],
)
def test_an_event_of_the_wrong_shape_is_refused_before_it_is_written(
    tmp_path: Path, record: Callable[[EventLog], object], setting: str, must: str
) -> None:
    """It was written as given, checksum and all, and the next load of the run refused it as
    damage: the whole run could no longer be read, resumed or listed."""
    with EventLog("shape", tmp_path) as log:
        run_step(log, "a", lambda: 1)
        with pytest.raises(SettingError) as refused:
            record(log)
        said = str(refused.value)
        assert said.startswith(f"{setting} of the") and "run 'shape'" in said and must in said, said
        assert refused.value.setting == setting
        run_step(log, "b", lambda: 2)  # the log goes on
    assert [s.result for s in read_run("shape", tmp_path).steps] == [1, 2]


def test_a_fork_whose_child_s_log_cannot_be_read_is_refused_and_says_where_to_fork(tmp_path: Path) -> None:
    # The fork could not know whose child it was, so it skipped it and replayed the start as
    # its source's child: the two trees shared a child again, the damaged one.
    from nb_durable import fork
    from nb_durable.core.whole_runs.children import child_id, start_child

    with EventLog("p", tmp_path) as log:
        run_step(log, "plan", lambda: "plan")
        start_child(log, "spawn", child_id("p", "spawn"), {"task": "count"})
    child_log = tmp_path / "p.spawn.jsonl"
    child_log.write_bytes(b"not a log line\n" + child_log.read_bytes())  # damaged at line 1, not torn
    with pytest.raises(RunError, match=r"started child run 'p.spawn', whose log cannot be read .* Fork at 1 or fewer steps"):
        fork("p", "f", at=2, root=tmp_path)
    assert not (tmp_path / "f.jsonl").exists()
    fork("p", "f", at=1, root=tmp_path).close()  # before the start: nothing to copy
