"""A loopback HTTP server that speaks the Anthropic Messages API, for tests.

Design:

* The real ``anthropic`` SDK (2.x, built on httpx2, which respx/pytest-httpx cannot see) talks
  to this server over TCP: in-process (a ``ThreadingHTTPServer`` in a daemon thread), from real
  Jupyter kernels via ``ANTHROPIC_BASE_URL``, or as a separate process
  (``python -m tests.fakes.messages_api --port P --scenario FILE.json --log FILE.jsonl``).
* Replies depend on the conversation, not on a global queue; a scenario maps each request to
  an action (a reply or a fault), by turn and attempt.
* Strict where the real API is strict; refused requests are recorded and never reach the
  scenario.
* Every request is recorded, and the per-turn bookkeeping is a pure function of the records.
* Standard library only: the subprocess starts fast and never imports anthropic.

* Where issue 11's features meet the API it behaves like the real one: thinking blocks are
  signed and verified when sent back (400 if altered), streamed as ``thinking_delta`` and
  ``signature_delta``; ``max_tokens`` cuts a reply (thinking counts); refusals carry
  ``stop_details``; prompt caching is accounted per prefix and TTL; ``count_tokens`` answers
  from the same estimate; errors can say ``x-should-retry``; streams can end too early; a
  context window can be set; ``max_tokens: 0`` pre-warms the cache. What the real API decides
  per model or account (answering model, minimum cacheable length, accepted thinking types,
  refused sampling parameters, context window) is a ``MessagesAPIServer`` keyword.

One concept per module:

* ``content``: building blocks and messages (``text``, ``tool_use``, ``thinking``, ``user``, ...);
* ``scenario``: the actions (``Reply``, ``Error``, ``StreamError``, ``Delay``, ``Drop``,
  ``BrokenStream``; ``reply``, ``refusal``, ``cut_off``) and the scenarios that choose them,
  with their JSON form;
* ``tokens``: the one token estimate (prompt elements, output, ``truncate``);
* ``thinking_rules``: the thinking/effort/sampling rules, signatures, and emitted thinking blocks;
* ``caching``: cache breakpoints and their rules, the prompt cache, ``CacheAccount``;
* ``validate``: the request rules of the real API (uses ``thinking_rules`` and ``caching``);
* ``compose``: a scripted reply turned into the message sent (cut, thinking, usage, model);
* ``wire``: error bodies and Server-Sent Events;
* ``answers``: each action on the wire, and the ``count_tokens`` answer;
* ``batches``: the Message Batches endpoints (create, retrieve, results, cancel, list), strict,
  with a processing delay tests control and per-request outcomes from the scenario;
* ``records``: ``RecordedRequest``, the JSON-lines log, and ``turn_stats`` (what *answered*,
  *completed* and *repeat* mean is written there);
* ``connection``: one HTTP connection (keep-alive, chunked SSE, drops);
* ``server``: ``MessagesAPIServer``, which ties them together;
* ``process`` and ``__main__``: the same server in a child process.
"""

from __future__ import annotations

from tests.fakes.messages_api.caching import (
    CacheAccount,
    PromptCache,
)
from tests.fakes.messages_api.content import (
    assistant,
    redacted_thinking,
    text,
    thinking,
    tool_result,
    tool_use,
    usage,
    user,
)
from tests.fakes.messages_api.process import (
    MessagesAPIProcess,
)
from tests.fakes.messages_api.records import (
    RecordedRequest,
    TurnStats,
    UsageTotals,
    read_request_log,
    turn_stats,
    usage_totals,
)
from tests.fakes.messages_api.scenario import (
    STOP_REASONS,
    Action,
    BrokenStream,
    Delay,
    Drop,
    Error,
    Expired,
    FunctionScenario,
    OverloadStorm,
    Reply,
    Scenario,
    ScenarioExhausted,
    ScriptedScenario,
    Stall,
    StreamError,
    action_from_json,
    action_to_json,
    cut_off,
    refusal,
    reply,
)
from tests.fakes.messages_api.server import (
    MessagesAPIServer,
)
from tests.fakes.messages_api.thinking_rules import (
    Signer,
)
from tests.fakes.messages_api.tokens import (
    prompt_tokens,
)

__all__ = [
    "Action",
    "BrokenStream",
    "CacheAccount",
    "Delay",
    "Drop",
    "Error",
    "Expired",
    "FunctionScenario",
    "MessagesAPIProcess",
    "MessagesAPIServer",
    "OverloadStorm",
    "PromptCache",
    "RecordedRequest",
    "Reply",
    "STOP_REASONS",
    "Scenario",
    "ScenarioExhausted",
    "ScriptedScenario",
    "Stall",
    "Signer",
    "StreamError",
    "TurnStats",
    "UsageTotals",
    "action_from_json",
    "action_to_json",
    "assistant",
    "cut_off",
    "prompt_tokens",
    "read_request_log",
    "redacted_thinking",
    "refusal",
    "reply",
    "text",
    "thinking",
    "tool_result",
    "tool_use",
    "turn_stats",
    "usage",
    "usage_totals",
    "user",
]
