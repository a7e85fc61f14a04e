"""A listing's cursor (``core.index.cursor``): its token reads back exactly, a damaged one is
refused with what to do, and runs updated at the same moment page in run id order on every store."""

from __future__ import annotations

import base64
import math
import os
import re
import string
import struct
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from nb_durable import EventLog, Store, list_runs, open_store, run_step
from nb_durable.core.index.cursor import Cursor, listing_key
from nb_durable.core.index.rows import index_of
from nb_durable.core.writing import writer
from nb_durable.errors import SettingError
from tests.fakes.wrapped import WrappedStore

_COPY = "copy the cursor whole from the next-page line of the listing that gave it, or list from the newest runs without it"


@pytest.mark.parametrize(
    "cursor",
    [
        Cursor(1765027188.123, "r1"),
        Cursor(1765027188.1234567, "fix.delegate-0-0-toolu_01SlQVcxHJCuamNf1nmlaaLT"),
        Cursor(0.0, "é-ü ünïcode id"),
        Cursor(5e-324, "x"),
        Cursor.at(None, "never-updated"),  # a run with no update time: the cursor after it, last
    ],
)
def test_a_cursor_reads_back_exactly_as_short_text_a_shell_takes_as_it_is(cursor: Cursor) -> None:
    token = cursor.token
    assert Cursor.parse(token) == cursor and Cursor.parse(f" {token}\n") == cursor  # pasted with its line's end
    assert set(token) <= set(string.ascii_letters + string.digits + "-_")
    assert token.startswith("A")  # never "-": a command line would take it for a flag
    assert len(token) <= math.ceil((1 + 8 + len(cursor.run_id.encode()) + 4) * 4 / 3)


def test_the_next_page_is_the_runs_after_the_cursor_in_listing_order() -> None:
    cursor = Cursor(100.0, "m")
    assert cursor.passed(99.0, "a") and cursor.passed(100.0, "n") and cursor.passed(None, "a")
    assert not cursor.passed(100.0, "m") and not cursor.passed(100.0, "l") and not cursor.passed(101.0, "z")
    assert sorted([(100.0, "b"), (101.0, "z"), (100.0, "a")], key=lambda k: listing_key(*k)) == [(101.0, "z"), (100.0, "a"), (100.0, "b")]


def test_a_run_with_no_update_time_sorts_after_every_time_and_its_cursor_pages_on_among_such_runs() -> None:
    """It sorted as time 0, so among runs of time 0 by id, where the SQL stores put it before or
    after all of them; now before any time, as their columns hold it (``sort_time``)."""
    keys = [(None, "b"), (0.0, "z"), (None, "a"), (-5.0, "y"), (1.0, "x")]
    assert sorted(keys, key=lambda k: listing_key(*k)) == [(1.0, "x"), (0.0, "z"), (-5.0, "y"), (None, "a"), (None, "b")]
    after_a = Cursor.at(None, "a")
    assert after_a.passed(None, "b") and not after_a.passed(None, "a") and not after_a.passed(-5.0, "y")
    assert Cursor(0.0, "z").passed(None, "a")


def _payload(version: int, when: float, run_id: bytes) -> str:
    import hashlib

    raw = struct.pack(">Bd", version, when) + run_id
    return base64.urlsafe_b64encode(raw + hashlib.blake2b(raw, digest_size=4).digest()).decode().rstrip("=")


def _edited(token: str) -> str:
    """The token with its last letter of the run id changed, as a hand edit would."""
    at = len(token) - 8
    return token[:at] + ("x" if token[at] != "x" else "y") + token[at + 1 :]


@pytest.mark.parametrize(
    ("token", "said"),
    [
        ("", "after is no cursor: a cursor is letters, digits, - and _ only"),
        ("page-2!", "after is no cursor: a cursor is letters, digits, - and _ only"),
        ("AAAA AAAA", "after is no cursor: a cursor is letters, digits, - and _ only"),
        ("AQID", "after is no cursor this nb_durable gave (too short, or of another version)"),
        ("r4", "after is no cursor (a run id is none: a cursor starts with A)"),  # was "cut short or changed"
        ("nightly-report", "after is no cursor (a run id is none: a cursor starts with A)"),
        (_payload(2, 1.0, b"r1"), "after is no cursor this nb_durable gave (too short, or of another version)"),
        (Cursor(1765027188.5, "run-0001").token[:-3], "after was cut short or changed (it is no whole encoding)"),
        (Cursor(1765027188.5, "run-0001").token[:-4], "after was cut short or changed (its check does not match)"),
        (_edited(Cursor(1765027188.5, "run-0001").token), "after was cut short or changed (its check does not match)"),
        (_payload(1, math.inf, b"r1"), "after names no run a listing could have shown"),
        (_payload(1, math.nan, b"r1"), "after names no run a listing could have shown"),
        (_payload(1, 1.0, b"\xff\xfe"), "after names no run a listing could have shown"),
    ],
)
def test_a_damaged_cursor_is_refused_saying_what_is_wrong_and_what_to_do(token: str, said: str) -> None:
    with pytest.raises(SettingError) as refused:
        Cursor.parse(token)
    assert str(refused.value) == f"{said}; {_COPY}, not {token!r}"
    with pytest.raises(SettingError, match=re.escape(said)):
        list_runs("memory://cursor-refused", after=token)


def test_a_cursor_and_an_offset_together_are_refused() -> None:
    with pytest.raises(SettingError) as refused:
        list_runs("memory://cursor-and-offset", after=Cursor(1.0, "r").token, offset=5)
    assert str(refused.value) == (
        "offset must be 0 with a cursor (after), which already says where the page starts: page on by the cursor alone, not 5"
    )


def test_runs_updated_at_the_same_moment_page_by_cursor_in_run_id_order(store_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Ties are where an (updated_at) cursor alone would skip or repeat runs: every event of these
    runs is written at one frozen time, so only the run id orders them."""
    monkeypatch.setattr(writer, "time", SimpleNamespace(time=lambda: 1765027188.25))
    ids = ["b", "a", "d", "c", "e"]
    for run_id in ids:
        with EventLog(run_id, store_url) as log:
            run_step(log, "s", lambda: 1)
    whole = list_runs(store_url)
    assert [s.run_id for s in whole] == sorted(ids) and {s.updated_at for s in whole} == {1765027188.25}
    for limit in (1, 2, 4):
        shown, after = [], None
        while True:
            page = list_runs(store_url, limit=limit, after=after)
            shown += [s.run_id for s in page]
            if len(page) < limit:
                break
            after = page[-1].cursor
        assert shown == sorted(ids), limit
    assert [s.run_id for s in list_runs(store_url, after=whole[1].cursor)] == ["c", "d", "e"]


class KeepsNoIndex(WrappedStore):
    """A store with the ``Store`` protocol alone, as a third party's may be: no run index, so
    ``list_runs`` reads every log (``list_runs_from_logs``) and pages those."""


def test_a_store_with_no_index_pages_by_cursor_too() -> None:
    inner = open_store("memory://cursor-no-index")
    for i in range(5):
        with EventLog(f"r{i}", inner) as log:
            run_step(log, "s", lambda: 1)
        time.sleep(0.002)  # distinct update times: the order is the runs' own
    store = KeepsNoIndex(inner)
    assert isinstance(store, Store) and index_of(store) is None
    first = list_runs(store, limit=2)
    assert [s.run_id for s in first] == ["r4", "r3"]
    assert [s.run_id for s in list_runs(store, limit=2, after=first[-1].cursor)] == ["r2", "r1"]
    assert [s.run_id for s in list_runs(store, after=Cursor.at(first[-1].updated_at, "r3"))] == ["r2", "r1", "r0"]


def test_a_run_given_for_its_cursor_is_refused_on_every_store(store_url: str) -> None:
    """``list_runs(after=page[-1])``, the run where its ``.cursor`` was meant: a store asking its
    query (SQLite) listed the next page from it, one filtering its rows (JSONL) failed with an
    AttributeError. Every store refuses it, saying what to pass."""
    for run_id in ("a", "b"):
        with EventLog(run_id, store_url) as log:
            run_step(log, "s", lambda: 1)
    whole = list_runs(store_url)
    last = whole[0]
    with pytest.raises(SettingError) as refused:
        list_runs(store_url, after=last)  # type: ignore[arg-type]
    assert str(refused.value) == (
        f"after is no cursor: pass the cursor of the page's last run (page[-1].cursor), a str, not \"RunSummary '{last.run_id}'\""
    )
    assert list_runs(store_url, after=Cursor.at(last.updated_at, last.run_id)) == whole[1:]


@pytest.mark.parametrize("kind", ["folder", "sqlite"])
def test_a_store_whose_path_is_not_utf8_pages_by_cursor(tmp_path: Path, kind: str) -> None:
    """Its listing's next page raised "'utf-8' codec can't encode character '\\udcff'": the
    cursor's store fingerprint hashed the path as UTF-8 text, which its bytes are not."""
    name = os.fsdecode(b"runs-\xff") + (".db" if kind == "sqlite" else "")
    store = str(tmp_path / name)
    for i in range(3):
        with EventLog(f"r{i}", store) as log:
            log.start_run({"task": f"task {i}"})
        time.sleep(0.002)  # distinct update times: the order is the runs' own
    with open_store(store) as runs:
        first = list_runs(runs, limit=2)
        rest = list_runs(runs, after=Cursor.parse(first[-1].cursor))
    assert [s.run_id for s in first + rest] == ["r2", "r1", "r0"]
    with pytest.raises(SettingError, match="made by a listing of another store"), open_store("memory://other") as other:
        list_runs(other, after=Cursor.parse(first[-1].cursor))
