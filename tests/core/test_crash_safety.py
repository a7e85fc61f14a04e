"""Torn writes are forgiven only at the end of a log; damage anywhere else is an error.

Properties, over logs hypothesis makes up: cutting a log short anywhere inside its last
event recovers every complete event before it; changing any byte before the last event
raises ``LogCorruptedError`` naming the file and the line.
"""

from __future__ import annotations

import uuid
import warnings
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nb_durable import EventLog, read_run, run_step
from nb_durable.errors import LogCorruptedError, TornLineWarning

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53), 2**53) | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)

SETTINGS = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def write_log(root: Path, results: list[Any]) -> bytes:
    assert not root.exists(), "each example needs a fresh folder"
    with EventLog("prop", root, durability="none") as log:
        for i, value in enumerate(results):
            run_step(log, f"s{i}", lambda value=value: value)  # type: ignore[misc]  # mypy cannot infer a lambda with a default argument
    return (root / "prop.jsonl").read_bytes()


def recovered(root: Path) -> tuple[list[Any], list[str]]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        steps = read_run("prop", root).steps
    return [s.result for s in steps], [str(w.message) for w in caught if issubclass(w.category, TornLineWarning)]


@SETTINGS
@given(results=st.lists(json_values, min_size=1, max_size=5))
def test_truncating_the_last_event_anywhere_recovers_all_complete_events(tmp_path: Path, results: list[Any]) -> None:
    root = tmp_path / uuid.uuid4().hex
    data = write_log(root, results)
    last_start = data.rindex(b"\n", 0, len(data) - 1) + 1
    for cut in range(last_start, len(data) + 1):
        (root / "prop.jsonl").write_bytes(data[:cut])
        got, torn = recovered(root)
        if cut == len(data):
            assert got == results and torn == []
        else:
            assert got == results[:-1]
            assert bool(torn) == (cut > last_start)


@SETTINGS
@given(results=st.lists(json_values, min_size=1, max_size=4), where=st.floats(0, 1, exclude_max=True), byte=st.integers(0, 255))
def test_any_changed_byte_before_the_last_event_is_an_error(
    tmp_path: Path, results: list[Any], where: float, byte: int
) -> None:
    root = tmp_path / uuid.uuid4().hex
    data = write_log(root, results)
    last_start = data.rindex(b"\n", 0, len(data) - 1) + 1
    offset = int(where * last_start)
    if data[offset] == byte:
        byte = (byte + 1) % 256
    damaged = data[:offset] + bytes([byte]) + data[offset + 1 :]
    (root / "prop.jsonl").write_bytes(damaged)
    with pytest.raises(LogCorruptedError) as info:
        read_run("prop", root)
    assert "prop.jsonl" in str(info.value) and info.value.line >= 1


def test_the_writer_truncates_a_torn_tail_before_appending(tmp_path: Path) -> None:
    with EventLog("torn", tmp_path) as log:
        run_step(log, "a", lambda: 1)
        run_step(log, "b", lambda: 2)
    path = tmp_path / "torn.jsonl"
    path.write_bytes(path.read_bytes()[:-7])
    with pytest.warns(TornLineWarning, match=r"torn last line \(line 3 of .*torn.jsonl"):
        log = EventLog("torn", tmp_path)
    with log:
        assert run_step(log, "a", lambda: 0) == 1
        assert run_step(log, "b", lambda: 20) == 20
    assert [s.result for s in read_run("torn", tmp_path).steps] == [1, 20]


def test_a_complete_last_line_with_a_bad_checksum_is_dropped_as_torn(tmp_path: Path) -> None:
    with EventLog("crc", tmp_path) as log:
        run_step(log, "a", lambda: "x")
        run_step(log, "b", lambda: "y")
    path = tmp_path / "crc.jsonl"
    path.write_bytes(path.read_bytes().replace(b'"result":"y"', b'"result":"z"'))
    with pytest.warns(TornLineWarning, match="checksum"):
        assert [s.result for s in read_run("crc", tmp_path).steps] == ["x"]


def test_two_lines_merged_by_a_lost_newline_are_corruption_not_a_tear(tmp_path: Path) -> None:
    with EventLog("merge", tmp_path) as log:
        run_step(log, "a", lambda: "x")
        run_step(log, "b", lambda: "y")
    path = tmp_path / "merge.jsonl"
    data = path.read_bytes()
    second_newline = data.index(b"\n", data.index(b"\n") + 1)
    path.write_bytes(data[:second_newline] + b" " + data[second_newline + 1 :])
    with pytest.raises(LogCorruptedError, match="line 2"):
        read_run("merge", tmp_path)


def test_damage_in_the_middle_names_file_and_line_and_loses_nothing(tmp_path: Path) -> None:
    with EventLog("mid", tmp_path) as log:
        for name in "abc":
            run_step(log, name, lambda name=name: name)  # type: ignore[misc]  # mypy cannot infer a lambda with a default argument
    path = tmp_path / "mid.jsonl"
    original = path.read_bytes()
    path.write_bytes(original.replace(b'"result":"b"', b'"result":"B"'))
    damaged = path.read_bytes()
    with pytest.raises(LogCorruptedError, match=r"damaged at line 3 of .*mid.jsonl.*nothing was dropped") as info:
        EventLog("mid", tmp_path)
    assert info.value.line == 3
    assert path.read_bytes() == damaged


def test_a_log_from_a_newer_schema_says_to_upgrade(tmp_path: Path) -> None:
    from nb_durable.core.codec import encode_event

    line = encode_event(0, 1.0, "run_started", {"run_id": "new", "settings": {}}).replace(b'"v":1', b'"v":9')
    import zlib

    line = line[:-19] + b',"crc":"%08x"}\n' % zlib.crc32(line[:-19])
    (tmp_path / "new.jsonl").write_bytes(line + line.replace(b'"seq":0', b'"seq":1'))
    with pytest.raises(LogCorruptedError, match="newer.*upgrade nb_durable"):
        read_run("new", tmp_path)
