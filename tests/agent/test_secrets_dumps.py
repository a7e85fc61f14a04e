"""A known secret in a hex dump (xxd, hexdump -C, od) is masked row by row, the rest of the dump kept.

The dumps are made by the real commands, through the real run_bash tool: a dump cuts the
secret into rows of 16 bytes, each shown as hex digits and again in an ASCII column, between
offsets, so no form of the value was in the output and the whole secret went to the model.
"""

from __future__ import annotations

import os
import random
import shlex
import subprocess
from pathlib import Path

import pytest

from nb_durable.agent.secrets import Redactor
from nb_durable.agent.tools import ToolContext, ToolRegistry, builtin_tools

SECRET = "tok+en/value=42xyz-Zq9Zq9-secret"  # in no known format: only its value tells it
NAME = "DEPLOY_TOKEN"
BEFORE = b"hello world, my key is "  # the secret starts at byte 23: it spans three rows
DATA = BEFORE + SECRET.encode() + b" ok\nmore text here to pad the dump a bit\n"
DUMPS = ["xxd", "xxd -g1 -u", "hexdump -C", "od -c", "od -An -c", "od -tx1", "od -An -tx1", "od -Ax -tx1z"]


def leaks(text: str) -> list[str]:
    """Pieces of the secret in ``text``: 4 characters of it (alone, or as ``od -c`` spaces them),
    or 3 of its bytes in hex."""
    pieces = {SECRET[i : i + 4] for i in range(len(SECRET) - 3)}
    pieces |= {"   ".join(p) for p in pieces}
    data = SECRET.encode()
    hexes = {data[i : i + 3].hex(*sep) for i in range(len(data) - 2) for sep in ((), (" ",))}
    hexes |= {h.upper() for h in hexes}
    return sorted(p for p in pieces | hexes if p in text)


def dump(command: str, data: bytes) -> str:
    return subprocess.run(shlex.split(command), input=data, capture_output=True, check=True).stdout.decode()


def masked_as_expected(raw: str, rows: set[int], marker: str) -> str:
    """``raw``, each row in ``rows`` (by index) as its offset and ``marker``, the others as they were."""
    out = []
    for i, line in enumerate(raw.splitlines(keepends=True)):
        if i in rows:
            offset = "" if line.startswith(" ") else line.split(" ")[0]  # od -An: no offsets
            out.append((f"{offset} {marker}" if offset else marker) + "\n")
        else:
            out.append(line)
    return "".join(out)


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    (root / "data.txt").write_bytes(DATA)
    return root


def run_bash(ws: Path, command: str) -> str:
    registry = ToolRegistry(builtin_tools(output_limit=20_000))
    ctx = ToolContext.for_step(ws, "run-1", "tool:1:0:toolu_1", env={"PATH": os.environ["PATH"], NAME: SECRET})
    result = registry.run("run_bash", {"command": command}, ctx)
    assert not result.is_error, result.content
    return result.content


@pytest.mark.parametrize("command", DUMPS)
def test_a_secret_in_a_dump_is_masked_in_every_row_that_carries_a_byte_of_it(ws: Path, command: str) -> None:
    raw = dump(command, DATA)
    assert leaks(raw), "the dump shows the secret: the test must be able to fail"
    shown = run_bash(ws, f"{command} data.txt")
    # Bytes 23..54 of 16-byte rows: rows 1, 2 and 3; row 0, the rows after and the last offset stay.
    assert shown == masked_as_expected(raw, {1, 2, 3}, f"[REDACTED:{NAME}]") + "[exit status 0]"
    assert not leaks(shown)


def test_the_rows_repeated_under_a_star_are_read_through(ws: Path) -> None:
    """``hexdump -C`` and ``od`` print one row for a run of equal rows, then ``*``; a secret that
    starts in the last of them goes on in the row after the star."""
    secret = "=" * 6 + "tail-after-the-star-Zq9"
    (ws / "padded.bin").write_bytes(b"=" * 48 + secret[6:].encode() + b"\n")
    registry = ToolRegistry(builtin_tools())
    ctx = ToolContext.for_step(ws, "r", "s", env={"PATH": os.environ["PATH"], "PAD_TOKEN": secret})
    for command in ("hexdump -C padded.bin", "od -c padded.bin"):
        shown = registry.run("run_bash", {"command": command}, ctx).content
        lines = shown.splitlines()
        assert lines[1] == "*" and lines[0].endswith("[REDACTED:PAD_TOKEN]") and lines[2].endswith("[REDACTED:PAD_TOKEN]"), shown
        assert "tail" not in shown and "74 61 69 6c" not in shown, shown


def test_a_dump_without_a_secret_and_ordinary_text_are_left_as_they_are() -> None:
    r = Redactor({NAME: SECRET})
    noise = random.Random(7).randbytes(4096)
    for command in DUMPS:
        raw = dump(command, noise)
        assert r.redact(raw) == raw, command
    text = "   a   b   c\n 12 34 56\n00000000: not a dump\ndeadbeef  |x|\n"
    assert r.redact(text) == text


def test_three_digit_numbers_past_a_byte_are_ordinary_output_not_od_rows(ws: Path) -> None:
    """``od -c`` shows a byte in octal, at most 377: a line of numbers above it (file modes, a
    table) is no row of a dump, and run_bash failed on it with "bytes must be in range(0, 256)"."""
    command = "printf 'modes\\n 644 755 400\\n0000000 777 600\\n'"
    assert run_bash(ws, command) == "modes\n 644 755 400\n0000000 777 600\n[exit status 0]"


def test_a_dump_read_in_random_pieces_is_masked_as_it_is_whole() -> None:
    """Redaction of a command's output as it streams: no row goes out before the rows after
    it show whether it carries a secret."""
    r = Redactor({NAME: SECRET})
    text = "".join(dump(command, DATA) + "some output between\n" for command in DUMPS) * 3
    whole = r.redact(text)
    assert not leaks(whole) and whole.count(f"[REDACTED:{NAME}]") == 3 * 3 * len(DUMPS)
    for seed in range(20):
        rng = random.Random(seed)
        stream, out, pos = r.stream(), [], 0
        while pos < len(text):
            step = rng.choice([1, 7, 50, 333, 2000, 20_000])
            out.append(stream.feed(text[pos : pos + step]))
            pos += step
        out.append(stream.flush())
        assert "".join(out) == whole, seed


def test_a_long_secret_in_the_widest_dump_is_held_back_whole_while_it_streams() -> None:
    """A credentials file in a variable (a service account's JSON, 4 KB) dumped 8 bytes a row,
    after 16-digit offsets: more characters a byte than any form of the value in plain text
    takes, and every row is held back until the last shows the secret whole."""
    secret = "".join(random.Random(3).choices("abcdefghijklmnopqrstuvwxyz0123456789", k=4000))
    r = Redactor({"SERVICE_ACCOUNT_KEY": secret})
    text = "before\n" + dump("xxd -c8 -g1 -o 0x7000000000000000", b"{" + secret.encode() + b"}\n") + "after\n"
    whole = r.redact(text)
    assert whole.count("[REDACTED:SERVICE_ACCOUNT_KEY]") == 501 and secret[:6] not in whole
    stream = r.stream()
    out = [stream.feed(text[i : i + 4096]) for i in range(0, len(text), 4096)]
    assert "".join(out) + stream.flush() == whole


def test_a_dump_of_a_saved_dump_file_is_masked_by_read_file(ws: Path) -> None:
    (ws / "dump.txt").write_text(dump("xxd", DATA))
    registry = ToolRegistry(builtin_tools())
    ctx = ToolContext.for_step(ws, "r", "s", env={"PATH": os.environ["PATH"], NAME: SECRET})
    shown = registry.run("read_file", {"path": "dump.txt"}, ctx).content
    assert shown.startswith("00000000: 6865 6c6c") and f"00000010: [REDACTED:{NAME}]" in shown and not leaks(shown)
