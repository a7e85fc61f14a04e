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
from nb_durable.agent.secrets.dumps import span_bound
from nb_durable.agent.tools import ToolContext, ToolRegistry, builtin_tools

SECRET = "tok+en/value=42xyz-Zq9Zq9-secret"  # in no known format: only its value tells it
NAME = "DEPLOY_TOKEN"
BEFORE = b"hello world, my key is "  # the secret starts at byte 23: it spans three rows
DATA = BEFORE + SECRET.encode() + b" ok\nmore text here to pad the dump a bit\n"
DUMPS = ["xxd", "xxd -g1 -u", "hexdump -C", "od -c", "od -An -c", "od -tx1", "od -An -tx1", "od -Ax -tx1z"]
# Two-byte words, each pair of bytes swapped; DATA's odd last byte is a word with a zero high byte.
WORDS = ["hexdump", "hexdump -x", "hexdump -o", "od", "od -x", "od -An -t x2"]
DUMPS += WORDS


def leaks(text: str, secret: str = SECRET) -> list[str]:
    """Pieces of the secret in ``text``: 4 characters of it (alone, or as ``od -c`` spaces them),
    3 of its bytes in hex, or 4 as two two-byte words (hex or octal, each pair swapped)."""
    pieces = {secret[i : i + 4] for i in range(len(secret) - 3)}
    pieces |= {"   ".join(p) for p in pieces}
    data = secret.encode()
    hexes = {data[i : i + 3].hex(*sep) for i in range(len(data) - 2) for sep in ((), (" ",))}
    hexes |= {h.upper() for h in hexes}
    words = [int.from_bytes(data[i : i + 2], "little") for i in range(len(data) - 1)]
    pairs = {f"{words[i]:{f}} {words[i + 2]:{f}}" for i in range(len(words) - 2) for f in ("04x", "06o")}
    collapsed = " ".join(text.split())  # hexdump -x and -o put 4 and 2 spaces between words
    return sorted(p for p in pieces | hexes if p in text) + sorted(p for p in pairs if p in collapsed)


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
    """A credentials file in a variable (a service account's JSON, 4 KB) dumped 4 bytes a row,
    after 16-digit offsets: more characters a byte than any form of the value in plain text
    takes, and every row is held back until the last shows the secret whole."""
    secret = "".join(random.Random(3).choices("abcdefghijklmnopqrstuvwxyz0123456789", k=4000))
    r = Redactor({"SERVICE_ACCOUNT_KEY": secret})
    text = "before\n" + dump("xxd -c4 -g1 -o 0x7000000000000000", b"{" + secret.encode() + b"}\n") + "after\n"
    whole = r.redact(text)
    assert whole.count("[REDACTED:SERVICE_ACCOUNT_KEY]") == 1001 and secret[:6] not in whole
    stream = r.stream()
    out = [stream.feed(text[i : i + 4096]) for i in range(0, len(text), 4096)]
    assert "".join(out) + stream.flush() == whole


@pytest.mark.parametrize(
    "command",
    ["xxd -c4 -g1 -o 0x7000000000000000", "od -w4 -c", "hexdump -x", "xxd -c256 -g1 -o 0x7000000000000000", "od -w256 -c"],
)
def test_the_streaming_bound_covers_every_row_of_the_narrowest_and_widest_dumps(command: str) -> None:
    """``span_bound(n)``: what a redactor holds back so that the rows of a match of n bytes are
    all in one piece. The rows of a whole dump of n bytes are those of a match of n bytes."""
    for size in (8, 100, 4000):
        data = random.Random(size).randbytes(size)
        assert len(dump(command, data)) <= span_bound(size), size


def test_a_dump_of_a_saved_dump_file_is_masked_by_read_file(ws: Path) -> None:
    (ws / "dump.txt").write_text(dump("xxd", DATA))
    registry = ToolRegistry(builtin_tools())
    ctx = ToolContext.for_step(ws, "r", "s", env={"PATH": os.environ["PATH"], NAME: SECRET})
    shown = registry.run("read_file", {"path": "dump.txt"}, ctx).content
    assert shown.startswith("00000000: 6865 6c6c") and f"00000010: [REDACTED:{NAME}]" in shown and not leaks(shown)


# A secret from byte 120 to 152 of varied text (no two rows alike: od and hexdump print a run of
# equal rows once): it crosses a row boundary at every width below.
PADDED = (b"the quick brown fox jumps over the lazy dog; " * 3)[:120] + SECRET.encode() + b" ok\nand a last line after it\n"


@pytest.mark.parametrize(
    ("command", "width"),
    [("xxd -c 4", 4), ("xxd -c 4 -g 1", 4), ("od -w4 -c", 4), ("od -An -w4 -t x1", 4), ("od -w4 -x", 4),
     ("xxd -c 128", 128), ("xxd -c 256 -g 1", 256), ("od -w128 -t x1z", 128), ("od -An -w200 -c", 200)],
)  # fmt: skip
def test_rows_of_4_to_256_bytes_are_read(ws: Path, command: str, width: int) -> None:
    (ws / "padded.bin").write_bytes(PADDED)
    raw = dump(command, PADDED)
    assert leaks(raw), "the dump shows the secret: the test must be able to fail"
    shown = run_bash(ws, f"{command} padded.bin")
    rows = set(range(120 // width, (152 - 1) // width + 1))
    assert shown == masked_as_expected(raw, rows, f"[REDACTED:{NAME}]") + "[exit status 0]"
    assert not leaks(shown)


@pytest.mark.parametrize("command", ["hexdump -x", "hexdump -o", "hexdump"])
def test_a_short_secret_alone_in_a_padded_row_is_masked(command: str) -> None:
    """hexdump pads a dump's only row to the width of rows it does not have: 8 characters for
    each two bytes with -x and -o, wider than a row of its own bytes would be."""
    secret = "Zq9-tok-en"
    raw = dump(command, secret.encode())
    assert leaks(raw, secret)
    shown = Redactor({NAME: secret}).redact(raw)
    assert shown.splitlines()[0] == f"0000000 [REDACTED:{NAME}]" and not leaks(shown, secret), shown


KEYS = {"anthropic-key": "sk-ant-api03-" + "Zq9xAb-_" * 12, "github-token": "ghp_" + "a1B2c3D4e5" * 4}
ENV_FILE = f'{{"config": {{"key": "{KEYS["anthropic-key"]}"}}}}\nGITHUB=ghp_{KEYS["github-token"][4:]}\nDB_PASSWORD=hunter2-but-longer\n'


@pytest.mark.parametrize("command", ["xxd", "hexdump -C", "hexdump", "od -c", "od -An -tx1", "xxd -c 4"])
def test_a_known_credential_format_in_a_dump_is_masked_though_no_variable_holds_it(ws: Path, command: str) -> None:
    """``xxd .env`` of keys the agent's environment does not have: the formats are searched in
    the dump's bytes as they are in plain text."""
    (ws / ".env").write_text(ENV_FILE)
    raw = dump(command, ENV_FILE.encode())
    assert any(leaks(raw, key) for key in KEYS.values()), "the dump shows the keys: the test must be able to fail"
    shown = run_bash(ws, f"{command} .env")
    for label, key in [*KEYS.items(), ("secret-assignment", "hunter2-but-longer")]:
        assert f"[REDACTED:{label}]" in shown and not leaks(shown, key), (label, shown)
    assert shown.splitlines()[0] == raw.splitlines()[0], "the row before the first key is kept"


def test_ordinary_output_that_looks_like_a_dump_is_left_as_it_is(ws: Path) -> None:
    """Tables of numbers, ls -l, checksums and columns of octal-looking numbers: lines some of
    which read as rows (indented two-digit and four-digit numbers, six-digit numbers after an
    offset-like one); a known secret and every format are searched in what they show, and nothing
    is masked. Six-digit numbers above 177777 are no octal word (they would not fit two bytes)."""
    r = Redactor({NAME: SECRET, "PIN_CODE": "73190482"})
    commands = [
        "ls -l /usr/bin | head -200",
        "sha256sum /etc/hostname /etc/passwd; md5sum /etc/passwd",
        "seq 1000 1999 | paste -d ' ' - - - - - - - - | sed 's/^/ /'",
        "seq 10 99 | paste -d ' ' - - - - - - - - | sed 's/^/ /'",
        "seq 1000000 1000999 | paste -d ' ' - - - - - - - -",
        "seq 270000 270999 | paste -d ' ' - - - - - - - -",
        "printf '   1   2   3   4\\n   5   6   7   9\\n'",
        "git hash-object --stdin <<< hello; printf 'deadbeef  |x|\\n0000000 6568 zz\\n'",
    ]
    for command in commands:
        text = subprocess.run(["bash", "-c", command], capture_output=True, check=True).stdout.decode()
        assert r.redact(text) == text, command
        assert run_bash(ws, command) == text + "[exit status 0]", command


@pytest.mark.parametrize("command", ["hexdump", "od -x", "od", "xxd -c 4", "xxd -c 128", "od -w4 -c"])
def test_a_secret_cut_between_two_streamed_pieces_is_masked(command: str) -> None:
    """A command's output arrives in pieces: the rows of the secret's first bytes come in one, the
    rest in the next, and none of them goes out before the second piece shows them a secret's.
    A known value, and a key in a known format that no variable holds."""
    cases = [(Redactor({NAME: SECRET}), PADDED, SECRET), (Redactor(), ENV_FILE.encode(), KEYS["anthropic-key"])]
    for r, data, secret in cases:
        text = dump(command, data)
        whole = r.redact(text)
        assert not leaks(whole, secret) and "[REDACTED:" in whole
        for cut in range(1, len(text), 7):
            stream = r.stream()
            first = stream.feed(text[:cut])
            assert not leaks(first, secret), (cut, first)
            assert first + stream.feed(text[cut:]) + stream.flush() == whole, cut
