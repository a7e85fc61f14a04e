"""A full context compacted, not fatal: a summarising model call of our own, as a recorded step.

When a turn would not fit (the reply stopped with ``model_context_window_exceeded``, the API
refused the prompt as too long, or the pre-flight count passes ``compact_at``), the run records
step ``compact:N`` before model call ``N``: the conversation so far but its last ``KEEP``
messages is sent to the model with a request to summarise it, and the summary replaces that
prefix: the next request is the task and the summary as its first message, then the kept
tail. The step's result (the summarising reply, how many messages it replaced, the estimated
tokens before and after) is all a replay needs to rebuild the same conversation byte for
byte, so a replay sends nothing; its request hash pins the conversation it summarised.

A compaction is possible only when there is a prefix to replace (more than the kept tail);
``context_full`` remains the outcome when compaction is off (``compaction="off"``), impossible,
or when its own call fails, or stops short of a summary (refused, cut at its ``max_tokens``,
its own prompt too long): such a reply replaces nothing, and the session after it has the point
again (a resume asks the turn again past it). A storm its retries could not outlast is no
failed compaction: the run fails as any storm fails it, the step unfinished for a resume.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ...core.codec import request_hash
from ...core.log import EventLog
from ...errors import ModelError, TransientModelError
from ..display.views import StepId, message_text
from ..models.messages import make_message, request_tokens
from ..models.stops import PROMPT_TOO_LONG, UNKNOWN_STOP
from ..money.budget import input_tokens
from .outcomes import ending_outcome
from .request import with_user_text, without_thinking

if TYPE_CHECKING:
    from .points import Stopped
    from .session import RunSession

__all__ = ["KEEP", "SUMMARY_SYSTEM", "Compaction", "compacted", "full_reply", "too_long"]

KEEP = 4
"""Messages kept as they are after a compaction: the last two exchanges (a reply and its answer)."""

SUMMARY_SYSTEM = (
    "You compact a conversation between a person and a software agent that has filled its context "
    "window. Write a summary the agent can continue from: the task, what has been done and found so "
    "far (files, commands, results, decisions), and what is left to do. Be complete and concrete; "
    "do not call tools."
)
SUMMARY_ASK = "Summarise the conversation so far, as the system prompt says, so the work can go on from the summary."
SUMMARY_HEADER = "[The conversation so far was compacted; its summary follows.]"
_SUMMARY_MAX_TOKENS = 4_096

_TOO_LONG = "prompt is too long"


def too_long(error: ModelError) -> bool:
    """Whether the API refused a request because its prompt does not fit the context window."""
    return error.status == 400 and _TOO_LONG in str(error)


def full_reply(error: ModelError, model: str) -> dict[str, Any]:
    """The reply a model step records when the API refused its prompt as too long: a full window,
    as if the model had stopped for it, so the run compacts (or ends ``context_full``)."""
    details = {"type": PROMPT_TOO_LONG, "explanation": str(error)}
    message = make_message([], stop_reason="model_context_window_exceeded", model=model, input_tokens=0,
                           output_tokens=0, stop_details=details)  # fmt: skip
    return {"message": dict(message), "request_id": error.request_id}


def _short(reply: Mapping[str, Any], max_tokens: int) -> str:
    """Why a summarising reply that stopped short of its summary is none ('' for one that finished)."""
    message = reply.get("message") or {}
    stop = message.get("stop_reason")
    outcome = ending_outcome(stop, unknown=bool(reply.get(UNKNOWN_STOP)))
    if outcome == "completed":
        return ""
    if outcome == "refused":
        details = message.get("stop_details") or {}
        category = details.get("category") if isinstance(details, Mapping) else None
        return f"the model refused to summarise{f' (category {category})' if category else ''}"
    if outcome == "truncated":
        return f"the summary was cut off at its max_tokens ({max_tokens:,})"
    if outcome == "context_full":
        return "the conversation to summarise does not fit the model's context window"
    return f"the summarising call stopped for a reason this version does not know ({stop})"


def _cut(messages: Sequence[Mapping[str, Any]]) -> int:
    """Where the kept tail starts (an assistant message), or 0 if there is nothing to replace."""
    cut = len(messages) - KEEP
    while cut > 1 and messages[cut].get("role") != "assistant":
        cut -= 1
    return cut if cut > 1 else 0


def compacted(task: str, messages: Sequence[Mapping[str, Any]], result: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The conversation after compaction ``result``: the task and summary, then the kept tail."""
    replaced = int(result["replaced"])
    summary = message_text(result.get("message") or {})
    first = {"role": "user", "content": f"{task}\n\n{SUMMARY_HEADER}\n{summary}"}
    return [first, *(dict(m) for m in messages[replaced:])]


class Compaction:
    """The compaction steps of one session's run."""

    def __init__(self, session: RunSession) -> None:
        self.session = session
        self.failed = ""
        """Why the last compaction's call failed ('' if it did not), live or replayed."""

    def recorded(self, log: EventLog, turn: int) -> bool:
        """Whether the log's next step is the compaction before model call ``turn``."""
        return log.replaying and log.record_at(log.cursor, result=False).step_id == str(StepId.compact(turn))

    def recorded_done(self, log: EventLog, turn: int) -> bool:
        """Whether the log holds that compaction finished: a failure it holds is one an earlier
        session met, and ended the run on; the session after it has its point again, past it."""
        return self.recorded(log, turn) and log.record_at(log.cursor, result=False).state == "completed"

    def due(
        self,
        log: EventLog,
        turn: int,
        messages: Sequence[Mapping[str, Any]],
        stopped: Stopped | None,
        request: Callable[[], dict[str, Any]],
    ) -> bool:
        """Whether step ``compact:turn`` comes here: recorded at the cursor, or, live, after a
        full window or before a request whose count (``request()``'s) passes ``compact_at``."""
        if self.recorded(log, turn):
            return True
        if log.replaying or self.session.current.compaction != "auto" or not _cut(messages):
            return False
        if stopped is not None:
            return stopped.outcome == "context_full"
        limit = self.session.current.compact_at
        return limit is not None and input_tokens(self.session.client, request()) > limit

    @staticmethod
    def request(fixed: Mapping[str, Any], messages: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
        """The summarising call's request: the conversation's prefix (all but the kept tail)."""
        prefix = [dict(without_thinking(m)) for m in messages[: _cut(messages)]]
        with_user_text(prefix, SUMMARY_ASK)
        request: dict[str, Any] = {
            "model": fixed["model"],
            "max_tokens": min(int(fixed["max_tokens"]), _SUMMARY_MAX_TOKENS),
            "system": SUMMARY_SYSTEM,
            "messages": prefix,
        }
        if fixed.get("tools"):
            # The prefix holds tool calls, which the API reads only with the tools defined.
            request["tools"], request["tool_choice"] = fixed["tools"], {"type": "none"}
        return request

    def run(
        self, log: EventLog, turn: int, fixed: Mapping[str, Any], messages: list[dict[str, Any]], chain: str
    ) -> dict[str, Any] | None:
        """Step ``compact:turn``: its result (recorded or live), or None if its call failed
        (recorded as the step's result: ``{"failed": why}``)."""
        cut = _cut(messages)
        request = self.request(fixed, messages)
        task = self.session.settings.task

        def shape(reply: dict[str, Any] | ModelError) -> dict[str, Any]:
            # What replaces what, in the step's result: a replay needs nothing else. A failed
            # call is a result too, so a replay meets the same failure without asking again.
            if isinstance(reply, TransientModelError):
                raise reply  # its retries spent on a cause that passes: the run fails, and a resume asks again
            if isinstance(reply, ModelError):
                return {"failed": str(reply)}
            short = _short(reply, int(request["max_tokens"]))
            if short:  # paid for (its usage is kept), but no summary to go on from
                return {**reply, "failed": short}
            after = compacted(task, messages, {**reply, "replaced": cut})
            before_tokens = request_tokens({**fixed, "messages": messages})
            return {**reply, "replaced": cut, "before": before_tokens, "after": request_tokens({**fixed, "messages": after})}

        result = self.session.model_seam.call(
            log, turn, request, request_hash([chain, "compact"]), step=StepId.compact(turn), shape=shape
        )
        self.failed = str(result.get("failed", ""))
        return None if "failed" in result else result
