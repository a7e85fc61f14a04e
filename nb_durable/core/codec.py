"""The only code that knows a line's bytes: encoding, the checksum, and the fast paths.

A line is the JSON of one event with a fixed key order, ``v`` (the schema version), ``seq``
(0, 1, 2, ... within a run), ``kind``, ``ts`` and, for step events, ``step`` and ``hash``
first, so a reader can index a log without parsing every result. The last key is ``crc``,
the CRC-32 of the line's bytes before ``,"crc"``::

    {"v":1,"seq":3,"kind":"step_completed","ts":1764504000.123,"step":"fetch:1","hash":"c444e7e4c3ecef19","result":42,"ms":0.812,"crc":"e48bb0ef"}

Only JSON crosses this boundary: no pickle, no reprs. A line that fails its checksum, its
version, its sequence number or its kind is damage; where damage may be forgiven (a torn
last line) is the reader's decision (``loading``), not this module's. Every offset into a
line (where the checksum sits, where a result starts and ends) is known here and nowhere
else; the fast paths exist because reopening and replaying long runs must cost little more
than reading their bytes (see docs/design.md, "The log format").
"""

from __future__ import annotations

import json
import re
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from .events import EVENT_CLASSES, EVENT_KINDS, RUN_FINISHED, RUN_STARTED, Event, shape_error

__all__ = [
    "SCHEMA_VERSION",
    "Header",
    "LineError",
    "has_log_shape",
    "NewerLineError",
    "RawJSON",
    "completed_header",
    "decode_event",
    "encode",
    "encode_event",
    "encode_json",
    "holds_whole_event",
    "pinned_hash",
    "read_header",
    "request_hash",
    "result_of",
    "round_trips",
    "scan_line",
    "split_tail",
]

SCHEMA_VERSION = 1

_encode = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode
_string: Any = getattr(json.encoder, "c_encode_basestring", None) or json.encoder.py_encode_basestring
_scan_json = json.JSONDecoder().scan_once  # type: ignore[attr-defined]  # C scanner, no whitespace checks
_CRC_PREFIX = b',"crc":"'
_CRC_SUFFIX_LEN = 18  # len(b',"crc":"0123abcd"}')


def has_log_shape(line: bytes) -> bool:
    """Whether a line is shaped as nb_durable writes one (a JSON object that opens with its
    version or ends with its checksum), whatever is wrong inside: damage, not another tool's file."""
    return line.startswith(b'{"v":') or (line[-_CRC_SUFFIX_LEN:-10] == _CRC_PREFIX and line[-2:] == b'"}')


class LineError(ValueError):
    """A line is not a valid event; the message says what is wrong with it."""


class NewerLineError(LineError):
    """A whole, checksummed line of a newer log schema than this nb_durable reads."""

    def __init__(self, version: int) -> None:
        super().__init__(_version_message(version))
        self.version = version


@dataclass(frozen=True, slots=True)
class RawJSON:
    """Text that is already valid JSON, to be written as it is."""

    text: str


def encode_event(seq: int, ts: float, kind: str, fields: Mapping[str, Any]) -> bytes:
    """The event's line, newline included; raises TypeError/ValueError for non-JSON fields.

    A field whose value is ``RawJSON`` is spliced in as already-encoded JSON, which lets a
    writer encode a large result once and reuse the text.
    """
    parts = ['{"v":%d,"seq":%d,"kind":"%s","ts":%.3f' % (SCHEMA_VERSION, seq, kind, ts)]
    for key, value in fields.items():
        kind_of = type(value)
        if kind_of is str:
            text = _string(value)
        elif kind_of is RawJSON:
            text = value.text
        elif kind_of is int:
            text = int.__repr__(value)
        elif kind_of is float:
            text = _float(value)
        else:
            text = _encode(value)
        parts.append(',"%s":%s' % (key, text))
    raw = "".join(parts).encode("utf-8")
    return b'%s,"crc":"%08x"}\n' % (raw, zlib.crc32(raw))


def encode(event: Event) -> bytes:
    """An event value's line, newline included."""
    return encode_event(event.seq, event.ts, event.kind, event.fields())


def _float(value: float) -> str:
    if value - value:  # NaN and infinities, which JSON cannot hold
        raise ValueError(f"{value!r} is not JSON")
    return float.__repr__(value)


def encode_json(value: Any) -> str:
    """Compact JSON as the log writes it (UTF-8, no NaN); TypeError/ValueError if not JSON."""
    return _encode(value)


class Header(NamedTuple):
    """What a reader needs to index a line without decoding its payload.

    A named tuple rather than a dataclass: one is made per line on every load.
    """

    seq: int
    kind: str
    ts: float
    step: str | None
    hash: str | None


_HEADER = re.compile(
    rb'\{"v":1,"seq":(\d+),"kind":"([a-z_]+)","ts":[-0-9.eE+]+'
    rb'(?:,"step":"([^"\\]*)"(?:,"hash":"([0-9a-f]+)")?)?[,}]'
)
_COMPLETED_LINE = re.compile(
    rb'\{"v":1,"seq":(\d+),"kind":"step_completed","ts":[-0-9.eE+]+,"step":"([^"\\\n]*)"'
    rb'(?:,"hash":"([0-9a-f]+)")?,"result":'
    # The duration, a JSON number, ends the line before the checksum. Inside the result a
    # ',"ms":' is followed by a '}', never by the line's end, so this is the line's own; the
    # result between is parsed when asked for. '.*' jumps to the end and looks back: a few
    # bytes are read, not the result.
    rb'.*,"ms":-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][-+]?[0-9]+)?$',
    re.DOTALL,
)
_TS = re.compile(rb'"ts":([-0-9.eE+]+)')
_KINDS = {kind.encode(): kind for kind in EVENT_KINDS}
_RUN_KINDS = (RUN_STARTED.encode(), RUN_FINISHED.encode())
assert SCHEMA_VERSION == 1, "_HEADER and _COMPLETED_LINE match the version literally"


def read_header(line: bytes) -> Header:
    """Check a line's checksum, version and kind, and read its header; raise LineError if bad."""
    seq, kind, step, digest = scan_line(line)
    m = _TS.search(line)
    return Header(seq, kind, float(m.group(1)) if m else 0.0, step, digest)


def _hex(digits: bytes) -> int:
    """A checksum's value, or -1 (which no CRC-32 equals) if the digits are damaged."""
    try:
        return int(digits, 16) if digits.isalnum() else -1
    except ValueError:
        return -1


def scan_line(line: bytes) -> tuple[int, str, str | None, str | None]:
    """``read_header`` without the timestamp, as a plain tuple (seq, kind, step, hash)."""
    if line[-_CRC_SUFFIX_LEN:-10] != _CRC_PREFIX or line[-2:] != b'"}':
        raise LineError("it does not end with an nb_durable checksum")
    recorded = _hex(line[-10:-2])
    if recorded < 0:
        raise LineError("its checksum is not hexadecimal")
    if zlib.crc32(line[:-_CRC_SUFFIX_LEN]) != recorded:
        raise LineError("its checksum does not match its bytes")
    m = _HEADER.match(line)
    if m is None:
        # Another version, or keys in another order: the slow path says exactly what is wrong.
        return _header_from_json(line)
    seq, kind, step, digest = m.groups()
    if step is None and kind not in _RUN_KINDS:
        # A step id with escaped characters defeats the fast path; the slow one is exact.
        return _header_from_json(line)
    name = _KINDS.get(kind)
    if name is None:
        raise LineError(f"its kind {kind.decode()!r} is unknown")
    return (
        int(seq),
        name,
        None if step is None else step.decode(),
        None if digest is None else digest.decode(),
    )


def completed_header(data: bytes, start: int, end: int, seq: int) -> tuple[bytes, bytes | None] | None:
    """The (step id, hash) of the step_completed line ``data[start:end]`` (newline included),
    if it is one with sequence number ``seq``, a good checksum and the fields its kind must
    hold (but for the result, parsed when asked for); None for any other line.

    The loader's hot path: the regex reads the header and the end only and the checksum is taken in
    place, with no copy of the line. A line this refuses goes through ``scan_line``, which
    says exactly what is wrong with it, if anything.
    """
    header = _COMPLETED_LINE.match(data, start, end - 19)
    if (
        header is None
        or int(header.group(1)) != seq
        or data[end - 19 : end - 11] != _CRC_PREFIX
        or zlib.crc32(data[start : end - 19]) != _hex(data[end - 11 : end - 3])
    ):
        return None
    return header.group(2), header.group(3)


def holds_whole_event(line: bytes) -> bool:
    """Whether a bad line begins with a whole valid event: two lines merged by damage to a
    newline, which a crash (that only cuts the last write short) cannot produce."""
    start = 0
    while (found := line.find(_CRC_PREFIX, start)) != -1:
        end = found + _CRC_SUFFIX_LEN
        if end < len(line):
            try:
                read_header(line[:end])
                return True
            except LineError:
                pass
        start = found + 1
    return False


def split_tail(data: bytes) -> tuple[bytes, bytes]:
    """A file's bytes as (every whole line, the unterminated tail a crash may have torn)."""
    end = data.rfind(b"\n") + 1
    return data[:end], data[end:]


def result_of(line: bytes) -> Any:
    """The result of a step_completed line (without its newline); LineError if it has none."""
    # The result sits between the first '"result":' and the last ',"ms":' (the layout
    # encode_event writes), so only the result itself is parsed.
    start = line.find(b',"result":')
    end = line.rfind(b',"ms":')
    if start != -1 and end > start:
        text = line[start + 10 : end].decode("utf-8")
        try:
            value, stop = _scan_json(text, 0)
        except StopIteration:
            stop = -1
        if stop == len(text):
            return value
    try:
        event = json.loads(line.decode("utf-8"))
    except ValueError as e:
        raise LineError(f"it is not JSON ({e})") from None
    if not isinstance(event, dict) or "result" not in event:
        raise LineError("its step_completed event has no result")
    return event["result"]


def _header_from_json(line: bytes) -> tuple[int, str, str | None, str | None]:
    try:
        d = json.loads(line)
    except ValueError:
        raise LineError("it is not JSON") from None
    if not isinstance(d, dict) or not isinstance(d.get("seq"), int) or not isinstance(d.get("v"), int):
        raise LineError("it has no version and sequence number")
    if d["v"] > SCHEMA_VERSION:
        raise NewerLineError(d["v"])
    if d["v"] != SCHEMA_VERSION:
        raise LineError(_version_message(d["v"]))
    if d.get("kind") not in EVENT_KINDS:
        raise LineError(f"its kind {d.get('kind')!r} is unknown")
    if not isinstance(d.get("ts"), (int, float)):
        raise LineError("it has no timestamp")
    return d["seq"], d["kind"], d.get("step"), d.get("hash")


def _version_message(version: int) -> str:
    if version > SCHEMA_VERSION:
        return (
            f"it was written with log schema v{version}, newer than this nb_durable reads "
            f"(v{SCHEMA_VERSION}); upgrade nb_durable"
        )
    return f"its schema version v{version} is unknown"


def decode_event(line: bytes) -> Event:
    """The typed event of a line whose header already checked out; LineError if its fields
    are not those its kind declares."""
    try:
        d = json.loads(line)
    except ValueError as e:
        raise LineError(f"it is not JSON ({e})") from None
    cls = EVENT_CLASSES[d["kind"]]
    # A checksummed line holds what it was written with, which is not always what its kind
    # must hold (a bug, a hand edit): a status no reader knows, a number in quotes.
    wrong = shape_error(cls, d)
    if wrong is not None:
        raise LineError(wrong)
    return cls(**{k: v for k, v in d.items() if k in cls.__dataclass_fields__ and k != "kind"})


def request_hash(request: Any) -> str:
    """A short stable hash of a step's request (canonical JSON, SHA-256, 16 hex digits)."""
    import hashlib  # here: most runs that import the log never hash a request

    text = json.dumps(request, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


_HEX = re.compile(r"[0-9a-f]+")


def pinned_hash(given: str | None) -> str | None:
    """A caller's ``request_hash`` as the log records it: hex digits as given, any other
    string hashed to hex (a reader of the log takes only hex for a hash; before, another
    string was written as given and read back as no hash, so any request replayed the step)."""
    if given is None or (type(given) is str and _HEX.fullmatch(given)):
        return given
    if not isinstance(given, str):
        raise TypeError(f"a request hash is a string, not {type(given).__name__}")
    return request_hash(given)


def round_trips(value: Any, depth: int = 0) -> bool:
    """Whether ``value`` comes back from JSON equal and of the same types (no tuples, no
    int keys, no subclasses); cheaper than a round trip for the large strings tools return."""
    kind = type(value)
    if kind is str or kind is int or kind is float or kind is bool or value is None:
        return True
    if depth > 64:
        return False
    if kind is list:
        return all(round_trips(v, depth + 1) for v in value)
    if kind is dict:
        return all(type(k) is str and round_trips(v, depth + 1) for k, v in value.items())
    return False


@dataclass(frozen=True, slots=True)
class StoredLog:
    """A run's bytes as a store holds them: whole lines, then any unterminated tail."""

    data: bytes
    """Every complete line, each ending in a newline."""
    tail: bytes
    """Bytes after the last newline: the torn write of a crash, or b""."""
    location: str
    can_tear: bool
    """Whether a crash can cut this store's last write short (files can; transactions cannot)."""

    @classmethod
    def from_file(cls, data: bytes, location: str) -> StoredLog:
        """A log file's bytes, cut after the last newline."""
        whole, tail = split_tail(data)
        return cls(whole, tail, location, True)

    @classmethod
    def from_lines(cls, lines: Sequence[bytes], location: str) -> StoredLog:
        """Lines kept one per row (no newlines), as transactional stores hold them."""
        return cls(b"".join([line + b"\n" for line in lines]), b"", location, False)
