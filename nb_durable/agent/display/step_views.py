"""What displays see of a step: ``StepView``, built from its record by ``view_of`` alone.

``view_of(record)`` is the only builder of what a finished step looks like, from its record
in the log. The loop calls it as each step ends, live or replayed, and ``views.views_of``
calls it for a recorded run, so the cell's timeline, the CLI's progress and ``%agent_show``
draw the same step the same way (durations and retry counts included). While a step runs,
its view is a small overlay on ``pending_view`` (in flight, streaming text, retrying n/m),
replaced by the recorded view when it ends. Displays redraw from views; they never read the log.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any, Literal

from ...core.steps import StepRecord
from ..models.stops import refused_as_too_long
from ..money.cost import Usage
from ..money.prices import Price, model_asked, price_of_reply
from ..run.batch_step import BATCH_BY, batch_of
from .step_ids import StepId, StepKind
from .switches import compaction_said, switch_of, switches_said

__all__ = [
    "SKIPPED_OUTCOME",
    "answered_by",
    "batch_said",
    "broken_streams_said",
    "StepState",
    "StepView",
    "ToolCall",
    "decided",
    "message_text",
    "pending_view",
    "retries_said",
    "state_word",
    "thinking_text",
    "tool_calls_of",
    "unfinished",
    "usage_text",
    "view_of",
    "wait_said",
]

StepState = Literal[
    "replayed", "live", "in_flight", "waiting", "retrying", "failed", "cut_off", "in_doubt", "skipped", "recorded"
]
"""replayed: served from the log this session. live: ran and was recorded this session.
in_flight: running now. waiting: asks a person (an approval) and waits for the answer. retrying: the last attempt failed and another is scheduled.
failed: the step raised. cut_off: it was running when its session stopped (a resume runs it
again; of a tool with an effect outside, the log says in_doubt). in_doubt: an external tool was
cut off and its outcome is unknown.
skipped: in doubt, settled as outcome unknown. recorded: shown from the log, not run."""


def retries_said(view: StepView) -> str:
    """``after 2 retries (waited 5.0s)`` for a step that succeeded after failed attempts ('' for
    any other): what its row says of them, never its last failure, which did not end it."""
    if view.attempt < 2 or view.state not in ("live", "replayed", "recorded"):
        return ""
    retries = view.attempt - 1
    waited = f" (waited {seconds_said(view.waited)})" if view.waited >= NOTICED_WAIT else ""
    broken = f"; {broken_streams_said(view)}" if view.broken else ""
    return f"after {retries} retr{'y' if retries == 1 else 'ies'}{waited}{broken}"


def broken_streams_said(view: StepView) -> str:
    """``1 broken stream reported 1,200 in / 40 out`` for a model step whose streams broke
    after reporting usage ('' for any other): tokens paid beside the answer's, said where they went."""
    if not view.broken:
        return ""
    streams = "1 broken stream" if len(view.broken) == 1 else f"{len(view.broken)} broken streams"
    return f"{streams} reported {usage_text(sum((Usage.parse(u) for u in view.broken), Usage()))}"


def usage_text(usage: Usage) -> str:
    """A model call's tokens: every prompt token (saying how many the cache served) and the output."""
    cached = f" ({usage.cache_read_input_tokens:,} cached)" if usage.cache_read_input_tokens else ""
    return f"{usage.prompt_tokens:,} in{cached} / {usage.output_tokens:,} out"


def answered_by(view: StepView, run_model: str) -> str:
    """``answered by M`` for a model step asked of a model other than the run's own (``run_model``,
    which its header names): a turn after a fallback switch, or after another model was named.
    '' for any other, and for a step recorded before results named the model they asked."""
    if view.kind != "model" or not view.asked or not run_model or view.asked == run_model:
        return ""
    return f"answered by {view.asked}"


NOTICED_WAIT = 0.05
"""A wait shorter than this (it would read ``0.0s``) is none a person could notice: not said."""


def seconds_said(seconds: float) -> str:
    """A wait as a row says it: ``4.0s``, ``2m 30s``."""
    if seconds < 60:
        return f"{seconds:.1f}s"
    minutes, rest = divmod(round(seconds), 60)
    return f"{minutes}m {rest:02d}s"


def wait_said(view: StepView, left: float | None = None, *, drawn_once: bool = False) -> str:
    """What a step's row says of the wait before its next attempt ('' if it has none): ``waiting
    4.0s`` while it waits (``left``: the time still to wait, for a line redrawn as it goes), and
    of a step read back from its log that stopped in the middle of one, that it was waiting.
    Without it a step waiting out a backoff or a server's retry-after reads as one running.
    A row ``drawn_once`` (nothing redraws it as the wait passes: the notebook's) says when the
    next attempt is due, in local time (``retrying at 20:41:07, after a 4.0s wait``): a
    countdown frozen at its first value would still say "waiting 4.0s" a minute on."""
    if view.wait is None or view.wait < NOTICED_WAIT:
        return ""
    if view.state == "retrying":
        if drawn_once and view.retry_at is not None:
            return f"retrying at {time.strftime('%H:%M:%S', time.localtime(view.retry_at))}, after a {seconds_said(view.wait)} wait"
        return f"waiting {seconds_said(view.wait if left is None else max(left, 0.0))}"
    if view.state in ("failed", "cut_off"):
        return f"stopped while waiting {seconds_said(view.wait)} to retry"
    return ""


def unfinished(records: Iterable[StepRecord]) -> tuple[int, str]:
    """How many of a log's agent steps never completed, and their states in words (``1 cut off, 1 failed``)."""
    states = Counter(view_of(r).state for r in records if r.state != "completed" and StepId.is_agent_step(r.step_id))
    return sum(states.values()), ", ".join(f"{n} {state_word(state)}" for state, n in states.items())


def state_word(state: str) -> str:
    """A step state or run status as a person reads it (``cut_off`` -> ``cut off``): badges, columns, messages."""
    return state.replace("_", " ")


@dataclass(frozen=True, slots=True)
class ToolCall:
    """A tool call as the model asked for it."""

    name: str
    input: Any
    via: str = ""
    """Where the tool comes from, shown beside its name (``"MCP ledger · external"``), or ''."""


@dataclass(frozen=True, slots=True)
class StepView:
    """One step as a display shows it."""

    step_id: str
    kind: StepKind
    turn: int
    state: StepState
    title: str
    input: Any = None
    output: str = ""
    thinking: str = ""
    """A model step's thinking (the text between tool calls on current models), shown apart."""
    is_error: bool = False
    usage: Usage | None = None
    broken: tuple[Mapping[str, Any], ...] = ()
    """What each of a model step's attempts whose stream broke midway reported using before it
    broke (``AttemptFailed.usage``), paid though it gave no answer."""
    model: str = ""
    """The model that answered a model step (its reply's ``model``), which its cost is priced by."""
    asked: str = ""
    """The model a model step asked, if its result names it: its price when ``model`` has none."""
    ms: float | None = None
    attempt: int = 0
    max_attempts: int = 0
    error: str = ""
    wait: float | None = None
    """The wait before the step's next attempt, in seconds, as the retry policy set it (a backoff, or
    the server's retry-after): live while it retries; read back from the log, what its last failed
    attempt recorded (a step cut off in the middle of the wait). None: no wait (``wait_said``)."""
    retry_at: float | None = None
    """When the next attempt is due (``time.time()``), set with ``wait`` live: what a row drawn
    once says of the wait (``wait_said``). Never read back: the log records the wait, not this."""
    waited: float = 0.0
    """The waits its failed attempts recorded, in all: what a retried step spent waiting."""
    decision: str = ""
    stop_reason: str | None = None
    no_reply: bool = False
    """A model step the API refused as too long: it stands for a full window, and is no turn."""
    switched: str = ""
    """The switches to a fallback model the step made, as a decision row says them
    (``switched to M, overloaded: 3 x 529``), or ''."""
    batch: str = ""
    """The Message Batch a model step's answer came from, or '': its cost is at batch prices."""
    child: str = ""
    """The run a ``delegate`` step started, as its record names it, or ''."""

    def but(self, **changes: Any) -> StepView:
        """This view with some fields changed."""
        return replace(self, **changes)

    def price(self, run_model: str, prices: Mapping[str, Price] | None = None) -> Price:
        """The price of a model step's usage: by the model that answered, else by the one it asked
        (``run_model`` for a step whose result does not name it), at half price from a batch."""
        return price_of_reply({"model": self.model}, self.asked or run_model, prices, batch=bool(self.batch))


SKIPPED_OUTCOME = "skipped: outcome unknown, the model was told"
"""What a skipped (in-doubt) step shows: its process died mid-effect and nobody knows if it took."""
IN_DOUBT = "it started and recorded no result, so it may have taken effect: a resume decides (--in-doubt)"
"""Why an in-doubt step read from its log has no result (its live row says how it was cut off)."""


def message_text(message: Mapping[str, Any]) -> str:
    """The text blocks of a Message (as JSON), joined."""
    return "".join(b.get("text", "") for b in message.get("content") or [] if b.get("type") == "text")


def thinking_text(message: Mapping[str, Any]) -> str:
    """The thinking blocks of a Message (as JSON), joined; redacted thinking is named, not shown."""
    parts = []
    for block in message.get("content") or []:
        if block.get("type") == "thinking" and block.get("thinking"):
            parts.append(str(block["thinking"]))
        elif block.get("type") == "redacted_thinking":
            parts.append("[redacted thinking]")
    return "\n\n".join(parts)


def decided(decision: str, by: str, note: str = "") -> str:
    """A person's decision as every display says it, with the reason they gave: ``denied by ada: not yet``."""
    return f"{decision} by {by}: {note}" if note else f"{decision} by {by}"


def _title(step: StepId, call: ToolCall | None) -> str:
    """A row's title: a tool call's own name (and where it comes from), else the step in words."""
    if step.kind not in ("tool", "approval"):
        return step.words()
    name = call.name if call is not None else "tool"
    if call is not None and call.via:
        name = f"{name} · {call.via}"
    return name if step.kind == "tool" else f"approval for {name}"


_NO_ANSWER = {
    "expired": "request expired",
    "errored": "request errored",
    "canceled": "request canceled",
    "missing": "request missing from its batch",
    "unreadable": "could not be read",
}
"""What became of a batched request that fell back to a normal call, by its result's type."""


def batch_said(record: StepRecord, answered_in: str) -> str:
    """What batch mode did with a model step, for its title, or '' (not in batch mode, still gathering).

    Answered from a batch (``answered_in``): at half price. Fallen back to a normal call: why,
    and that it costs the full price (what a person reading the cost asks). A step with no
    result yet whose request is in a batch waits on it (hours, at worst): said apart from a
    call in flight, as no listing of the run could tell otherwise.
    """
    if answered_in:
        return "Message Batch, half price"
    said = batch_of(record.decisions)
    if said.fell_back:
        what = _NO_ANSWER.get(said.fell_back, said.fell_back)
        if said.fell_back == "errored" and said.why:
            what += f" ({said.why.split(':', 1)[0]})"
        return f"Message Batch {what}; sent as a normal call, full price"
    if said.batch_id and not (isinstance(record.result, dict) and record.result):
        return f"waiting on Message Batch {said.batch_id}, half price"
    return ""


def pending_view(step: StepId, call: ToolCall | None = None) -> StepView:
    """A step about to run, before anything is recorded of it."""
    return StepView(
        str(step), step.kind, step.turn, "in_flight", _title(step, call), input=None if call is None else call.input
    )


def _answered_after(record: StepRecord) -> int:
    """1 when a completed step's answer came from an attempt after its failed ones; 0 when it is
    what its last failure stands for (a prompt refused as too long: a full window, not a retry)."""
    result = record.result if isinstance(record.result, dict) else {}
    message = result.get("message")
    return 0 if isinstance(message, Mapping) and refused_as_too_long(message) else 1


def _last_tries(record: StepRecord) -> int:
    """The attempts of a step's last road: since it last moved to another model, and in the last
    session that asked it (each session numbers its attempts from 1, and each model has attempts of
    its own), so its n/m never counts past the retry policy's m."""
    since = max((d.seq for d in record.decisions if switch_of(d) is not None), default=-1)
    tries = 0
    for attempt in record.attempts:
        if attempt.seq > since:
            tries = 1 if attempt.attempt == 1 else tries + 1
    return tries


def view_of(
    record: StepRecord, *, state: StepState = "recorded", call: ToolCall | None = None, max_attempts: int = 0
) -> StepView:
    """How a recorded step looks: its title, output, usage, duration, retries and decisions.

    ``state`` says how this session met it (live, replayed, or recorded for inspection);
    an unfinished step shows as failed, cut off, in doubt or skipped whatever ``state`` says.
    ``call`` is the tool call a tool or approval step answers; ``max_attempts`` the retry
    policy's limit, shown beside the attempt count of a step that was retried.
    """
    step = StepId.parse(record.step_id)
    # The attempt a view shows: for a step that succeeded after retries, the one that worked;
    # for one that did not, its last of those the retry policy gave the model it asked last.
    attempts = len(record.attempts) + _answered_after(record) if record.state == "completed" and record.attempts else _last_tries(record)
    if record.state in ("in_doubt", "skipped"):
        state = record.state
    elif record.state == "interrupted":
        state = "cut_off"
    elif record.state != "completed":
        state = "failed"
    base = pending_view(step, call)
    # Gathered, then made once: each ``but`` copies every field, and a worker makes a view per step.
    fields: dict[str, Any] = {
        "state": state,
        "ms": record.ms,
        "attempt": attempts,
        "max_attempts": max_attempts if attempts else 0,
        "error": record.attempts[-1].message if record.attempts else (IN_DOUBT if state == "in_doubt" else ""),
        "wait": record.attempts[-1].delay if record.attempts and record.state != "completed" else None,
        "waited": sum(a.delay or 0.0 for a in record.attempts),
        # An approval's decision is its output (below); any other step's is said beside it.
        # Batch mode's decisions are the step's own road, said in its title (``batch_said``), not a person's.
        "decision": "" if step.kind == "approval" else ", ".join(decided(d.decision, d.by, d.note) for d in record.decisions if d.by != BATCH_BY),
        "switched": switches_said(record.decisions),
    }
    fields.update(_said_of(step, record, base.title))
    return base.but(**fields)


def _said_of(step: StepId, record: StepRecord, title: str) -> dict[str, Any]:
    """The fields of a recorded step's view that its kind's result says: its output, and a
    model call's usage, model, thinking and title."""
    result = record.result if isinstance(record.result, dict) else {}
    if step.kind in ("model", "compact"):
        # Both are model calls: priced by the model that answered, at half price from a batch.
        message = result.get("message") or {}
        batch = str((result.get("batch") or {}).get("id") or "")
        said = batch_said(record, answered_in=batch)
        fields: dict[str, Any] = {
            "title": f"{title} ({said})" if said else title,
            "batch": batch,
            "broken": tuple(a.usage for a in record.attempts if a.usage is not None),
            "usage": Usage.of(message) if message else None,
            "model": str(message.get("model") or ""),
            "asked": model_asked(result, ""),
        }
        if step.kind == "compact":
            return {**fields, "output": compaction_said(result), "is_error": "failed" in result}
        return {
            **fields, "output": message_text(message), "thinking": thinking_text(message), "stop_reason": message.get("stop_reason"),
            "no_reply": bool(message) and refused_as_too_long(message),
        }  # fmt: skip
    if step.kind == "settings":
        changes = result.get("changes") or {}
        by = str(result.get("by", "?"))
        action = {"reask": "; the stopped turn is asked again", "continue": "; the model continues its turn"}
        then = action.get(str(result.get("action")), "")
        if changes:
            return {"output": f"{', '.join(f'{k}={v}' for k, v in sorted(changes.items()))} by {by}{then}"}
        # Nothing changed: the step is a resume's mark (a worker's, or what became of a stopped turn).
        said = f"resumed by {by}, no setting changed{then}" if by != "resume" else f"resumed, no setting changed{then}"
        return {"title": step.words(changed=False), "output": said}
    if step.kind == "user":
        return {"output": str(result.get("text", ""))}
    if step.kind == "delegate":
        child = str(result.get("child") or "")
        return {"output": f"started child run {child or '?'}" if result else "", "child": child}
    if step.kind == "approval":
        approved = bool(result.get("approved"))
        verdict = decided("approved" if approved else "denied", str(result.get("by", "?")), str(result.get("note") or ""))
        return {"output": verdict if result else "", "is_error": bool(result) and not approved}
    if record.state == "skipped" and not result:
        # Nothing was recorded but the decision: say what the model was told, not nothing.
        return {"output": SKIPPED_OUTCOME, "is_error": True}
    return {"output": str(result.get("content", "")), "is_error": bool(result.get("is_error"))}


def tool_calls_of(messages: Iterable[Mapping[str, Any]], sources: Mapping[str, Any] | None = None) -> dict[str, ToolCall]:
    """tool_use id -> the call, from recorded model replies (``sources``: the run's recorded tool sources)."""
    out: dict[str, ToolCall] = {}
    for message in messages:
        for block in message.get("content") or []:
            if block.get("type") == "tool_use":
                name = block.get("name", "tool")
                source = (sources or {}).get(name)
                via = str(source.get("label", "")) if isinstance(source, Mapping) else ""
                out[block["id"]] = ToolCall(name, block.get("input"), via)
    return out
