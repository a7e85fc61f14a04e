"""The event kinds of a run's log and their JSON form, one line per event.

A line is the JSON of one event with a fixed key order, ``v`` (the schema version), ``seq``
(0, 1, 2, ... within a run), ``kind``, ``ts`` and, for step events, ``step`` first, so a
reader can index a log without parsing every result. The last key is ``crc``, the CRC-32
of the line's bytes before ``,"crc"``::

    {"v":1,"seq":3,"kind":"step_completed","ts":1764504000.123,"step":"fetch:1","result":42,"ms":0.8,"crc":"5c1b04f1"}

Only JSON crosses this boundary: no pickle, no reprs. A line that fails its checksum, its
version, its sequence number or its kind is damage; where damage may be forgiven (a torn
last line) is the reader's decision, not this module's.
"""

from __future__ import annotations

import json
import re
import zlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal, NamedTuple

__all__ = [
    "ATTEMPT_FAILED",
    "STEP_COMPLETED_HEADER",
    "DECISION",
    "EVENT_KINDS",
    "RUN_FINISHED",
    "RUN_STARTED",
    "SCHEMA_VERSION",
    "STEP_COMPLETED",
    "STEP_STARTED",
    "AttemptFailed",
    "Decision",
    "Effect",
    "Event",
    "Header",
    "LineError",
    "RawJSON",
    "RunFinished",
    "RunOutcome",
    "RunStarted",
    "StepCompleted",
    "StepStarted",
    "decode_event",
    "encode_event",
    "encode_json",
    "read_header",
    "scan_line",
]

SCHEMA_VERSION = 1

RUN_STARTED = "run_started"
STEP_STARTED = "step_started"
STEP_COMPLETED = "step_completed"
ATTEMPT_FAILED = "attempt_failed"
DECISION = "decision"
RUN_FINISHED = "run_finished"
EVENT_KINDS = frozenset(
    {RUN_STARTED, STEP_STARTED, STEP_COMPLETED, ATTEMPT_FAILED, DECISION, RUN_FINISHED}
)

Effect = Literal["pure", "idempotent", "external"]
"""What running a step does to the world: nothing, the same thing twice, or something new."""

RunOutcome = Literal["completed", "failed", "interrupted"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Event:
    """One recorded event of a run; ``seq`` is its position in the run's log."""

    kind: ClassVar[str] = ""
    seq: int
    ts: float

    def fields(self) -> dict[str, Any]:
        """The kind's own fields in log order (``step`` first), None values left out."""
        raise NotImplementedError


@dataclass(frozen=True, slots=True, kw_only=True)
class RunStarted(Event):
    """The run began; ``settings`` hold all a resume needs to rebuild it."""

    kind: ClassVar[str] = RUN_STARTED
    run_id: str
    settings: Mapping[str, Any] = field(default_factory=dict)
    forked_from: Mapping[str, Any] | None = None

    def fields(self) -> dict[str, Any]:
        out: dict[str, Any] = {"run_id": self.run_id, "settings": self.settings}
        if self.forked_from is not None:
            out["forked_from"] = self.forked_from
        return out


@dataclass(frozen=True, slots=True, kw_only=True)
class StepStarted(Event):
    """The intent: a step with effects is about to run (written before the effect)."""

    kind: ClassVar[str] = STEP_STARTED
    step: str
    key: str
    effect: Effect
    hash: str | None = None

    def fields(self) -> dict[str, Any]:
        return _drop_none(
            {"step": self.step, "hash": self.hash, "key": self.key, "effect": self.effect}
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class StepCompleted(Event):
    """A step's result, recorded before the run moves on."""

    kind: ClassVar[str] = STEP_COMPLETED
    step: str
    result: Any
    ms: float
    hash: str | None = None

    def fields(self) -> dict[str, Any]:
        return _drop_none({"step": self.step, "hash": self.hash, "result": self.result, "ms": self.ms})


@dataclass(frozen=True, slots=True, kw_only=True)
class AttemptFailed(Event):
    """An attempt at a step raised; ``delay`` is the wait before the next one, None if none."""

    kind: ClassVar[str] = ATTEMPT_FAILED
    step: str
    attempt: int
    error: str
    message: str = ""
    status: int | None = None
    delay: float | None = None

    def fields(self) -> dict[str, Any]:
        return _drop_none(
            {
                "step": self.step,
                "attempt": self.attempt,
                "error": self.error,
                "message": self.message,
                "status": self.status,
                "delay": self.delay,
            }
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class Decision(Event):
    """How an in-doubt step or an approval was settled (``decision``) and by whom (``by``)."""

    kind: ClassVar[str] = DECISION
    step: str
    decision: str
    by: str
    note: str = ""

    def fields(self) -> dict[str, Any]:
        return {"step": self.step, "decision": self.decision, "by": self.by, "note": self.note}


@dataclass(frozen=True, slots=True, kw_only=True)
class RunFinished(Event):
    """The run ended: completed, failed or interrupted; ``output`` is its final answer."""

    kind: ClassVar[str] = RUN_FINISHED
    status: RunOutcome
    output: Any = None
    error: str | None = None

    def fields(self) -> dict[str, Any]:
        return _drop_none({"status": self.status, "output": self.output, "error": self.error})


_CLASSES: dict[str, type[Event]] = {
    cls.kind: cls
    for cls in (RunStarted, StepStarted, StepCompleted, AttemptFailed, Decision, RunFinished)
}


def _drop_none(d: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in d.items() if v is not None}


_encode = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode
_string: Any = getattr(json.encoder, "c_encode_basestring", None) or json.encoder.py_encode_basestring
_CRC_PREFIX = b',"crc":"'
_CRC_SUFFIX_LEN = 18  # len(b',"crc":"0123abcd"}')


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


def _float(value: float) -> str:
    if value - value:  # NaN and infinities, which JSON cannot hold
        raise ValueError(f"{value!r} is not JSON")
    return float.__repr__(value)


@dataclass(frozen=True, slots=True)
class RawJSON:
    """Text that is already valid JSON, to be written as it is."""

    text: str


def encode_json(value: Any) -> str:
    """Compact JSON as the log writes it (UTF-8, no NaN); TypeError/ValueError if not JSON."""
    return _encode(value)


class LineError(ValueError):
    """A line is not a valid event; the message says what is wrong with it."""


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


def read_header(line: bytes) -> Header:
    """Check a line's checksum, version and kind, and read its header; raise LineError if bad."""
    seq, kind, step, digest = scan_line(line)
    m = _TS.search(line)
    return Header(seq, kind, float(m.group(1)) if m else 0.0, step, digest)


def scan_line(line: bytes) -> tuple[int, str, str | None, str | None]:
    """``read_header`` without the timestamp, as a plain tuple: the loader's hot path."""
    if line[-_CRC_SUFFIX_LEN:-10] != _CRC_PREFIX or line[-2:] != b'"}':
        raise LineError("it does not end with an nb_durable checksum")
    digits = line[-10:-2]
    try:
        recorded = int(digits, 16) if digits.isalnum() else -1
    except ValueError:
        recorded = -1
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


STEP_COMPLETED_HEADER = re.compile(
    rb'\{"v":1,"seq":(\d+),"kind":"step_completed","ts":[-0-9.eE+]+,"step":"([^"\\\n]*)"'
    rb'(?:,"hash":"([0-9a-f]+)")?,"result":'
)
"""The header of a step_completed line (groups: seq, step, hash): a loader's fast path only.
A line it does not match, or whose checksum fails, goes through ``scan_line``."""

_TS = re.compile(rb'"ts":([-0-9.eE+]+)')
_KINDS = {kind.encode(): kind for kind in EVENT_KINDS}
_RUN_KINDS = (RUN_STARTED.encode(), RUN_FINISHED.encode())
assert SCHEMA_VERSION == 1, "_HEADER matches the version literally"


def _header_from_json(line: bytes) -> tuple[int, str, str | None, str | None]:
    try:
        d = json.loads(line)
    except ValueError:
        raise LineError("it is not JSON") from None
    if not isinstance(d, dict) or not isinstance(d.get("seq"), int) or not isinstance(d.get("v"), int):
        raise LineError("it has no version and sequence number")
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
    """The typed event of a line whose header already checked out."""
    try:
        d = json.loads(line)
    except ValueError as e:
        raise LineError(f"it is not JSON ({e})") from None
    cls = _CLASSES[d["kind"]]
    try:
        return cls(**{k: v for k, v in d.items() if k in cls.__dataclass_fields__ and k != "kind"})
    except TypeError as e:
        raise LineError(f"its {d['kind']} event lacks a field ({e})") from None
