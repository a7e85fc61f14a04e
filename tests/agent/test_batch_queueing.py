"""Queueing a batch file through ``nb-durable run --batch``: whole or not at all, once per task line.

Every line is checked before any is written (a run id another task holds, a run id that
cannot name a run, a workspace that is not a folder), and the refusal names the line; a
file queued again, after a fix or with a line added, adds only what is new and says which
runs it did not add. The hints it prints (``wait --batch``, ``worker``) carry the ``--store``
they need and work as printed: this test runs them.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shlex
import subprocess
from pathlib import Path
from typing import Any

import pytest

from nb_durable.agent.fleet.batch import submit
from nb_durable.agent.fleet.batch_file import read_batch, task_run_ids
from nb_durable.core.log import EventLog
from nb_durable.core.runs import list_runs
from nb_durable.errors import EXIT_CODES, BatchFileError, InvalidRunIdError
from tests.conftest import make_store_url, nb_durable_cli


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return nb_durable_cli(*args, cwd=cwd, NB_DURABLE_DEMO_LATENCY="0")


def write_lines(path: Path, lines: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def printed_hint(out: str, after: str) -> list[str]:
    """The command a message printed after ``after``, split as a shell would."""
    tail = out.split(after, 1)[1].splitlines()[0]
    return shlex.split(tail.split(", and ")[0])


def test_a_bad_line_refuses_the_whole_file_and_names_it(tmp_path: Path) -> None:
    store = make_store_url("sqlite", tmp_path)
    ws = tmp_path / "ws"
    ws.mkdir()
    taken = cli("run", "--batch", str(write_lines(tmp_path / "one.jsonl", [{"task": "another task", "run": "taken"}])),
                "--store", store, "--workspace", str(ws), "--demo", cwd=tmp_path)
    assert taken.returncode == 0, taken.stderr
    good = [{"task": f"task {i}"} for i in range(1, 6)]
    for lines, line, said in [
        ([*good, {"task": "task 6", "run": "taken"}], 6, "run 'taken' already exists"),
        ([*good, {"task": "task 6", "run": "no/slashes"}], 6, "'no/slashes' cannot name a run"),
        ([*good, {"task": "task 6", "workspace": str(tmp_path / "missing")}], 6, "is not a folder"),
        ([*good, {"task": "task 6", "run": "dup"}, {"task": "task 7", "run": "dup"}], 7, "its run id 'dup' is also line 6's"),
    ]:
        tasks = write_lines(tmp_path / "tasks.jsonl", lines)
        done = cli("run", "--batch", str(tasks), "--store", store, "--workspace", str(ws), "--demo", cwd=tmp_path)
        assert done.returncode == EXIT_CODES["usage"], done.stdout + done.stderr
        assert f"{tasks}, line {line}: " in done.stderr and said in done.stderr, done.stderr
        assert "nothing was queued" in done.stderr
        assert [s.run_id for s in list_runs(store)] == ["taken"], f"a refused file queued runs: {done.stdout}"


def test_every_bad_line_of_a_file_is_said_at_once_and_nothing_is_queued(tmp_path: Path) -> None:
    """Only the first bad line was said: a person with a long file fixed one line per attempt.
    Now the lines that are not tasks (JSON, keys) and those the check finds (workspace, run ids)
    are said together, in line order, the first BATCH_LINES_SHOWN one by one and the rest counted."""
    from nb_durable.agent.fleet.batch import submit_batch
    from nb_durable.agent.fleet.batch_file import scan_batch
    from nb_durable.errors.agent import BATCH_LINES_SHOWN

    store = make_store_url("sqlite", tmp_path)
    ws = tmp_path / "ws"
    ws.mkdir()
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(
        '{"task": "fine"}\n'
        "{not json\n"
        '{"task": "t", "turns": 3}\n'
        '{"task": "fine too", "run": "dup"}\n'
        f'{{"task": "x", "workspace": {json.dumps(str(tmp_path / "missing"))}}}\n'
        '{"task": "again", "run": "dup"}\n'
        '{"task": ""}\n'
    )
    done = cli("run", "--batch", str(tasks), "--store", store, "--workspace", str(ws), "--demo", cwd=tmp_path)
    assert done.returncode == EXIT_CODES["usage"], done.stdout + done.stderr
    assert f"{tasks}: 5 lines are not tasks, so nothing was queued:\n  line 2: not JSON" in done.stderr, done.stderr
    said = [line.split(":", 1)[0].strip() for line in done.stderr.splitlines() if line.startswith("  line ")]
    assert said == ["line 2", "line 3", "line 5", "line 6", "line 7"], done.stderr
    assert "line 3: unknown key(s) 'turns'" in done.stderr and "line 5: the workspace" in done.stderr
    assert "line 6: its run id 'dup' is also line 4's" in done.stderr and "line 7: 'task' is missing or empty" in done.stderr
    assert done.stderr.rstrip().endswith("Fix those lines and submit the batch again"), done.stderr
    assert list_runs(store) == [], f"a refused file queued runs: {done.stdout}"

    many = write_lines(tmp_path / "many.jsonl", [{"task": "fine"}, *({"task": f"t{i}", "turns": i} for i in range(BATCH_LINES_SHOWN + 5))])
    scan = scan_batch(many)
    with pytest.raises(BatchFileError) as refused:
        submit_batch(scan.tasks, store=store, source=str(many), demo=True, workspace=str(ws), bad_lines=scan.problems)
    assert [n for n, _ in refused.value.problems] == list(range(2, BATCH_LINES_SHOWN + 7)) and refused.value.line == 2
    message = str(refused.value)
    assert f"line {BATCH_LINES_SHOWN + 1}: " in message and f"line {BATCH_LINES_SHOWN + 2}: " not in message, message
    assert "  and 5 more bad line(s)\n" in message, message
    with pytest.raises(BatchFileError) as read:
        read_batch(many)
    assert read.value.problems == refused.value.problems
    assert list_runs(store) == []


def test_a_file_queued_again_after_a_fix_adds_only_what_is_new_and_its_hints_work(tmp_path: Path) -> None:
    store = make_store_url("sqlite", tmp_path)
    ws = tmp_path / "ws"
    ws.mkdir()
    lines = [{"task": f"task {i}"} for i in range(1, 6)]
    tasks = write_lines(tmp_path / "tasks.jsonl", [*lines, {"task": "task 6", "run": "bad/id"}])
    assert cli("run", "--batch", str(tasks), "--store", store, "--workspace", str(ws), "--demo", cwd=tmp_path).returncode == 2
    write_lines(tasks, [*lines, {"task": "task 6", "run": "six"}])
    first = cli("run", "--batch", str(tasks), "--store", store, "--workspace", str(ws), "--demo", cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    assert "6 run(s) queued" in first.stdout and "not added" not in first.stdout, first.stdout
    ids = {s.run_id for s in list_runs(store)}
    assert len(ids) == 6 and "six" in ids

    write_lines(tasks, [{"task": "task 0"}, *lines, {"task": "task 6", "run": "six"}, {"task": "task 1"}])
    again = cli("run", "--batch", str(tasks), "--store", store, "--workspace", str(ws), "--demo", cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    assert again.stdout.count("not added ") == 6, again.stdout
    assert "2 run(s) queued, 6 queued before and not added" in again.stdout, again.stdout
    assert len(list_runs(store)) == 8, "line 1's task (now line 2) was queued twice"

    worker = printed_hint(again.stdout, "run them with: ")
    waiter = printed_hint(again.stdout, "gather them with: ")
    assert worker[:2] == ["nb-durable", "worker"] and "--store" in worker, again.stdout
    assert waiter[:2] == ["nb-durable", "wait"] and "--store" in waiter, again.stdout
    ran = cli(*worker[1:], "--once", cwd=tmp_path)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    waited = cli(*waiter[1:], cwd=tmp_path)
    assert waited.returncode == 0, waited.stdout + waited.stderr
    assert "8 of 8 run(s) completed" in waited.stdout, waited.stdout


def test_a_write_that_fails_part_way_deletes_what_it_queued(tmp_path: Path) -> None:
    """Line 3's run id is held by another writer (nothing recorded yet): lines 1-2 are undone."""
    store = make_store_url("sqlite", tmp_path)
    tasks = write_lines(tmp_path / "tasks.jsonl", [{"task": f"task {i}"} for i in range(1, 5)])
    third = task_run_ids(read_batch(tasks)[0])[2]
    with EventLog(third, store):
        done = cli("run", "--batch", str(tasks), "--store", store, "--workspace", str(tmp_path), "--demo", cwd=tmp_path)
    assert done.returncode == EXIT_CODES["locked"], done.stdout + done.stderr
    assert third in done.stderr, done.stderr
    assert list_runs(store) == [], "the runs written before the failure stayed queued"
    assert cli("run", "--batch", str(tasks), "--store", store, "--workspace", str(tmp_path), "--demo", cwd=tmp_path).returncode == 0
    assert len(list_runs(store)) == 4


def test_wait_timing_out_has_its_own_exit_code_and_a_hint_that_works(tmp_path: Path) -> None:
    store = make_store_url("sqlite", tmp_path)
    tasks = write_lines(tmp_path / "tasks.jsonl", [{"task": "task 1"}, {"task": "task 2"}])
    assert cli("run", "--batch", str(tasks), "--store", store, "--workspace", str(tmp_path), "--demo", cwd=tmp_path).returncode == 0
    waited = cli("wait", "--batch", str(tasks), "--store", store, "--timeout", "0.3", "--poll", "0.1", cwd=tmp_path)
    assert waited.returncode == EXIT_CODES["timed_out"] != EXIT_CODES["locked"], waited.stdout + waited.stderr
    assert "timed out with 2 run(s) not finished" in waited.stdout
    worker = printed_hint(waited.stdout, "start one with: ")
    assert worker[:2] == ["nb-durable", "worker"] and "--store" in worker, waited.stdout
    assert cli(*worker[1:], "--once", cwd=tmp_path).returncode == 0
    again = cli("wait", "--batch", str(tasks), "--store", store, "--timeout", "60", cwd=tmp_path)
    assert again.returncode == 0 and "2 of 2 run(s) completed" in again.stdout, again.stdout + again.stderr


def test_a_wait_polling_more_slowly_than_its_timeout_still_stops_at_the_timeout(tmp_path: Path) -> None:
    """--timeout 0.3 --poll 3600 slept the hour before it looked at the clock again, and --poll inf
    was a traceback (OverflowError: timestamp out of range for platform time_t); it is refused now,
    as never looking again, and so is an infinite --timeout (leave it out to wait for ever)."""
    store = make_store_url("sqlite", tmp_path)
    with EventLog("died", store) as log:  # no end: its writer died, and it waits for a worker
        log.start_run({"task": "t"})
    waited = nb_durable_cli("wait", "died", "--timeout", "0.3", "--poll", "3600", "--store", store, cwd=tmp_path, timeout=30)
    assert waited.returncode == EXIT_CODES["timed_out"], (waited.stdout, waited.stderr)
    assert "timed out with 1 run(s) not finished (1 interrupted): died (interrupted)" in waited.stdout, waited.stdout
    assert "Traceback" not in waited.stderr, waited.stderr
    for flag in ("--poll", "--timeout"):
        refused = nb_durable_cli("wait", "died", flag, "inf", "--store", store, cwd=tmp_path, timeout=30)
        assert refused.returncode == 2 and f"argument {flag}: must be a finite number, not inf" in refused.stderr, refused.stderr


def test_a_run_named_twice_is_waited_for_once(tmp_path: Path) -> None:
    """wait R R waited for a second result that never came: for ever, or until its timeout said
    "timed out with 0 run(s) not finished ()" of a run that had completed."""
    store = make_store_url("sqlite", tmp_path)
    with EventLog("done", store) as log:
        log.start_run({"task": "t"})
        log.finish_run("completed")
    waited = cli("wait", "done", "done", "--timeout", "5", "--store", store, cwd=tmp_path)
    assert waited.returncode == 0, (waited.stdout, waited.stderr)
    assert waited.stdout == "done: completed\n1 of 1 run(s) completed\n", waited.stdout


def test_a_wait_that_times_out_on_a_long_queue_counts_its_runs_and_names_the_first_ten(tmp_path: Path) -> None:
    """With 200 runs queued, a timed-out wait printed every one of them on one line."""
    store = make_store_url("sqlite", tmp_path)
    tasks = write_lines(tmp_path / "tasks.jsonl", [{"task": f"task {i}", "run": f"t{i:02d}"} for i in range(12)])
    assert cli("run", "--batch", str(tasks), "--store", store, "--workspace", str(tmp_path), "--demo", cwd=tmp_path).returncode == 0
    waited = cli("wait", "--batch", str(tasks), "--store", store, "--timeout", "0.2", "--poll", "0.1", cwd=tmp_path)
    assert waited.returncode == EXIT_CODES["timed_out"], waited.stdout + waited.stderr
    named = ", ".join(f"t{i:02d} (queued)" for i in range(10))
    assert f"timed out with 12 run(s) not finished (12 queued): {named}, and 2 more. They go on" in waited.stdout, waited.stdout
    assert "t10" not in waited.stdout and "t11" not in waited.stdout


def test_the_hints_name_a_store_whose_path_is_not_utf8_as_a_shell_can_take_it_back(tmp_path: Path) -> None:
    """wait's hint on stderr showed the byte 0xff of a store's folder as \\udcff, which no shell
    turns back into that byte: pasted, it named another store. Now it is bash's $'...' form."""
    folder = os.fsdecode(os.fsencode(str(tmp_path)) + b"/st\xffore")
    os.mkdir(folder)
    store = os.path.join(folder, "runs.db")
    tasks = write_lines(tmp_path / "tasks.jsonl", [{"task": "t", "run": "t1"}])
    queued = cli("run", "--batch", str(tasks), "--store", store, "--demo", cwd=tmp_path)
    assert queued.returncode == 0, queued.stderr
    waited = cli("wait", "t1", "--store", store, "--timeout", "0", cwd=tmp_path)
    assert waited.returncode == EXIT_CODES["timed_out"], waited.stderr
    said = waited.stderr + waited.stdout + queued.stdout
    assert "\\udc" not in said, said
    words = re.findall(r"--store (\$'[^']*')", said)
    assert len(words) == said.count("--store ") == 4, said  # wait's two hints, run --batch's two
    for word in set(words):
        pasted = subprocess.run(["bash", "-c", f"printf %s {word}"], capture_output=True, check=True)
        assert pasted.stdout == os.fsencode(store), (word, pasted.stdout)


def test_a_batch_file_that_cannot_be_read_or_is_not_utf8_is_said_and_a_bom_is_fine(tmp_path: Path) -> None:
    """A missing file or a folder raised a bare OSError traceback, and bytes that are not UTF-8
    were queued with U+FFFD in place of the person's text."""
    with pytest.raises(BatchFileError, match=r"cannot read the batch file .*nope.jsonl: No such file or directory. Nothing was queued"):
        read_batch(tmp_path / "nope.jsonl")
    with pytest.raises(BatchFileError, match="cannot read the batch file .*: Is a directory"):
        read_batch(tmp_path)
    latin = tmp_path / "latin.jsonl"
    latin.write_bytes(b'{"task": "fine"}\n{"task": "caf\xe9"}\n')
    with pytest.raises(BatchFileError, match=r"latin.jsonl, line 2: not UTF-8 \(byte 0xe9 at column 14\); save the file as UTF-8"):
        read_batch(latin)
    bom = tmp_path / "bom.jsonl"
    bom.write_bytes(b'\xef\xbb\xbf{"task": "caf\xc3\xa9"}\r\n')  # as Notepad saves it
    tasks, _ = read_batch(bom)
    assert [t.task for t in tasks] == ["café"]


def test_a_batch_file_with_no_task_is_said_as_a_whole_not_as_a_line_to_fix(tmp_path: Path) -> None:
    """An empty file was told "line 1: the file holds no task. Fix that line": it has no line 1."""
    for name, text in (("empty.jsonl", ""), ("blank.jsonl", "\n  \n")):
        (tmp_path / name).write_text(text)
        with pytest.raises(BatchFileError) as refused:
            read_batch(tmp_path / name)
        assert str(refused.value) == (
            f'cannot read the batch file {tmp_path / name}: it holds no task: write one JSON object a line, '
            'such as {"task": "..."}. Nothing was queued'
        )


def test_a_bad_line_is_told_in_its_own_keys(tmp_path: Path) -> None:
    """The CLI turned every max_turns of a message into --max-turns, so a batch file's line was
    told ''--max-turns' must be at least 1' and given '--max-turns' among the keys it may hold."""
    tasks = write_lines(tmp_path / "tasks.jsonl", [{"task": "t", "max_turns": 0}])
    told = cli("run", "--batch", str(tasks), cwd=tmp_path)
    assert told.returncode == EXIT_CODES["usage"], told.stderr
    assert "line 1: 'max_turns' must be at least 1, not 0" in told.stderr and "--max-turns" not in told.stderr, told.stderr
    keys = cli("run", "--batch", str(write_lines(tmp_path / "keys.jsonl", [{"task": "t", "turns": 3}])), cwd=tmp_path)
    assert "unknown key(s) 'turns'; a line may hold task, run, model, max_turns," in keys.stderr, keys.stderr


def test_a_bad_lines_values_are_said_as_the_json_file_spells_them(tmp_path: Path) -> None:
    """The file is JSON, but its bad values were said as Python says them (True, None, 'x'),
    which are not what the line holds nor what a person would search the file for."""
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(
        '{"task": "a", "tags": [true, null]}\n{"task": "b", "max_turns": false}\n{"task": "c", "run": 5}\n'
        '{"task": "d", "model": "x", "max_usd": -1}\n{"task": "e", "effort": "huge"}\nnull\n[1]\n'
    )
    with pytest.raises(BatchFileError) as refused:
        read_batch(tasks)
    assert [reason for _, reason in refused.value.problems] == [
        "'tags' must be non-empty strings, not [true, null]",
        "'max_turns' must be a JSON whole number, not false",
        "'run' must be a JSON string, not 5",
        "'max_usd' must be a positive number of dollars, not -1",
        "'effort' must be one of low, medium, high, xhigh, max, not \"huge\"",
        'a line must be a JSON object such as {"task": "..."}, not null',
        'a line must be a JSON object such as {"task": "..."}, not an array',
    ]


def test_a_priority_past_what_the_store_holds_is_refused_with_its_line_before_anything_is_queued(tmp_path: Path) -> None:
    """PostgreSQL's index holds a priority as an integer: a line (or --priority) past it was
    queued line by line until the write failed ('integer out of range'), leaving the lines
    before it queued; on SQLite it was a traceback. Now it is a bad line like any other."""
    store = make_store_url("sqlite", tmp_path)
    ws = tmp_path / "ws"
    ws.mkdir()
    tasks = write_lines(tmp_path / "tasks.jsonl", [{"task": "first"}, {"task": "second", "priority": 2**31}])
    done = cli("run", "--batch", str(tasks), "--store", store, "--workspace", str(ws), "--demo", cwd=tmp_path)
    assert done.returncode == EXIT_CODES["usage"], done.stdout + done.stderr
    assert f"{tasks}, line 2: 'priority' must be at most {2**31 - 1}, not {2**31}" in done.stderr, done.stderr
    assert list_runs(store) == []
    flag = cli("run", "--batch", str(write_lines(tmp_path / "one.jsonl", [{"task": "first"}])), "--priority", str(-(2**31) - 1),
               "--store", store, "--workspace", str(ws), "--demo", cwd=tmp_path)  # fmt: skip
    assert flag.returncode == EXIT_CODES["usage"] and f"--priority must be at least {-(2**31)}" in flag.stderr, flag.stderr
    half = cli("run", "--batch", str(write_lines(tmp_path / "half.jsonl", [{"task": "t", "priority": 1.5}])), cwd=tmp_path)
    assert "line 1: 'priority' must be a JSON whole number, not 1.5" in half.stderr, half.stderr


@pytest.mark.parametrize("kind", ["jsonl", "sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def test_a_refused_file_makes_no_store(kind: str, tmp_path: Path) -> None:
    """A file refused for a bad line made the store it named (an empty SQLite file, or the tables in
    a PostgreSQL schema) while checking its good lines: a mistyped --store was left made, empty."""
    store = make_store_url(kind, tmp_path)
    ws = tmp_path / "ws"
    ws.mkdir()
    bad = write_lines(tmp_path / "bad.jsonl", [{"task": "first"}, {"task": "second", "colour": "red"}])
    refused = cli("run", "--batch", str(bad), "--store", store, "--workspace", str(ws), "--demo", cwd=tmp_path)
    assert refused.returncode == EXIT_CODES["usage"] and "line 2: unknown key(s) 'colour'" in refused.stderr, refused.stderr
    listed = cli("runs", "--store", store, cwd=tmp_path)
    assert listed.returncode == EXIT_CODES["usage"] and "there is no store at" in listed.stderr, (listed.stdout, listed.stderr)
    good = write_lines(tmp_path / "good.jsonl", [{"task": "first"}])
    queued = cli("run", "--batch", str(good), "--store", store, "--workspace", str(ws), "--demo", cwd=tmp_path)
    assert queued.returncode == 0, queued.stderr
    assert [s.settings["task"] for s in list_runs(store)] == ["first"]


def test_an_empty_run_id_is_refused_not_taken_for_none(tmp_path: Path) -> None:
    """An empty id ("run": "" in a line, --run "" from an unset shell variable, run_id="")
    was taken for no id: the run got the id its task derives, so a rerun replayed that run."""
    store = make_store_url("sqlite", tmp_path)
    ws = tmp_path / "ws"
    ws.mkdir()
    said = "'' cannot name a run: use 1 to 128 letters"
    tasks = write_lines(tmp_path / "tasks.jsonl", [{"task": "first"}, {"task": "second", "run": ""}])
    line = cli("run", "--batch", str(tasks), "--store", store, "--workspace", str(ws), "--demo", cwd=tmp_path)
    assert line.returncode == EXIT_CODES["usage"], line.stdout + line.stderr
    assert f"{tasks}, line 2: {said}" in line.stderr and "nothing was queued" in line.stderr, line.stderr
    flag = cli("run", "say hi", "--run", "", "--store", store, "--workspace", str(ws), "--demo", cwd=tmp_path)
    assert flag.returncode == EXIT_CODES["usage"] and said in flag.stderr, flag.stdout + flag.stderr
    assert "Traceback" not in flag.stderr and list_runs(store) == []
    with pytest.raises(InvalidRunIdError, match=said):
        submit("say hi", run_id="", store=store, workspace=str(ws), demo=True)
    assert list_runs(store) == []


def test_runs_takes_a_batch_by_its_file_as_wait_does(tmp_path: Path) -> None:
    """``wait --batch tasks.jsonl`` gathered a file's runs, but ``runs --batch tasks.jsonl`` (and
    ``%agent_runs --batch``) took the file's name for a batch id and said no run matched."""
    from nb_durable.jupyter.runs_table import runs_table

    store = make_store_url("sqlite", tmp_path)
    ws = tmp_path / "ws"
    ws.mkdir()
    tasks = write_lines(tmp_path / "tasks.jsonl", [{"task": "first"}, {"task": "second", "run": "second"}])
    other = write_lines(tmp_path / "other.jsonl", [{"task": "elsewhere"}])
    for file in (tasks, other):
        queued = cli("run", "--batch", str(file), "--store", store, "--workspace", str(ws), "--demo", cwd=tmp_path)
        assert queued.returncode == 0, queued.stderr
    wanted = set(task_run_ids(read_batch(tasks)[0]))
    listed = cli("runs", "--batch", "tasks.jsonl", "--store", store, cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr
    assert {line.split()[0] for line in listed.stdout.splitlines()[1:]} == wanted, listed.stdout
    assert {summary.run_id for summary, _ in runs_table(store, batch=str(tasks)).rows} == wanted
    missing = cli("runs", "--batch", "missing.jsonl", "--store", store, cwd=tmp_path)
    assert missing.returncode == EXIT_CODES["usage"] and "cannot read the batch file missing.jsonl: No such file or directory. --batch takes the tasks file" in missing.stderr, missing.stderr


def test_a_task_of_long_words_gets_a_run_id_that_fits_and_a_short_one_keeps_its_own(tmp_path: Path) -> None:
    """A line whose first words are long (a hash, a long identifier) was refused, "cannot name
    a run", though nothing in it was wrong: its derived id was past 128 characters."""
    long_task = "a" * 300 + " " + "b" * 40
    tasks = write_lines(tmp_path / "tasks.jsonl", [{"task": long_task}, {"task": long_task}, {"task": "say hi"}])
    found, _ = read_batch(tasks)
    ids = task_run_ids(found)
    assert all(len(i) <= 128 for i in ids) and len(set(ids)) == 3, ids
    assert ids[0].startswith("aaaa") and ids[1].startswith("aaaa") and ids[1].endswith("-2"), ids
    said = json.dumps({"task": "say hi", "priority": None}, sort_keys=True)
    assert ids[2] == "say-hi-" + hashlib.sha256(said.encode()).hexdigest()[:8]  # a short one: as queued before
    queued = cli("run", "--batch", str(tasks), "--store", str(tmp_path / "runs"), cwd=tmp_path)
    assert queued.returncode == 0, queued.stderr
    assert sorted(s.run_id for s in list_runs(tmp_path / "runs")) == sorted(ids)
