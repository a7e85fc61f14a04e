"""The keeper's capper: every JSON line stays the JSON it was, each long string cut whole-character.

Seeded random messages (texts of quotes, backslashes, newlines, control characters, accents,
emoji and a lone surrogate; ASCII-escaped or not) are fed in random pieces; each line must
parse, keep its id, keep each text's beginning, and account for every byte it left out.
"""

from __future__ import annotations

import json
import random

from nb_durable.agent.tools.mcp._capped import JsonLineCapper, cut_note

ALPHABET = ["a", "é", '"', "\\", "\n", "\t", "😀", "\ud800x", "z", "€", "\u0001"]


def test_random_lines_fed_in_random_pieces_stay_json_and_account_for_every_byte_cut() -> None:
    rng = random.Random(1)
    for trial in range(1500):
        limit = rng.randint(8, 40)  # keys are strings too: none of the message's is longer than 7
        texts = ["".join(rng.choice(ALPHABET) for _ in range(rng.randint(0, 60))) for _ in range(3)]
        message = {"jsonrpc": "2.0", "id": trial, "result": {"content": [{"type": "text", "text": t} for t in texts]}}
        ascii_only = rng.random() < 0.5
        line = json.dumps(message, ensure_ascii=ascii_only).encode("utf-8", "surrogatepass") + b"\n"
        capper, out, at = JsonLineCapper(limit), b"", 0
        while at < len(line):
            step = rng.randint(1, 7)
            out += capper.feed(line[at : at + step])
            at += step
        assert out.endswith(b"\n") and out.count(b"\n") == 1
        back = json.loads(out.decode("utf-8", "surrogatepass"))
        assert back["id"] == trial
        for text, block in zip(texts, back["result"]["content"], strict=True):
            kept, cut = cut_note(block["text"])
            source = json.dumps(text, ensure_ascii=ascii_only)[1:-1].encode("utf-8", "surrogatepass")
            written = json.dumps(kept, ensure_ascii=ascii_only)[1:-1].encode("utf-8", "surrogatepass")
            assert text.startswith(kept) and len(source) == len(written) + cut
            assert cut == 0 or len(written) <= limit


def test_a_line_that_is_not_json_passes_unchanged_and_ends_where_its_newline_is() -> None:
    capper = JsonLineCapper(5)
    assert capper.feed(b'hello "world\nnext "line" ok\n') == b'hello "world\nnext "line" ok\n'
    assert capper.feed(b'{"a": "0123456789"}\n') == b'{"a": "01234[... 5 more bytes of this text were cut as it was read from the MCP server]"}\n'
