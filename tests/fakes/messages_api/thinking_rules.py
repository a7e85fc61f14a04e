"""Thinking: the request's ``thinking``/``output_config`` rules, signatures, and reply blocks.

* ``thinking`` is one of the SDK's ``ThinkingConfigParam`` shapes: ``{"type": "enabled",
  "budget_tokens": N, "display"?}`` (N >= 1024 and below ``max_tokens``), ``{"type":
  "adaptive", "display"?}``, ``{"type": "between_tools"}`` (thinking off; the short progress
  notes written between tool calls come back as thinking blocks) or ``{"type": "disabled"}``;
  ``display`` is ``"summarized"`` or ``"omitted"``. ``output_config.effort`` is one of
  ``low|medium|high|xhigh|max``. While thinking is on (enabled, adaptive), a forced
  ``tool_choice`` (``any``/``tool``), ``temperature`` other than 1, ``top_k``, or ``top_p``
  below 0.95 is a 400. A server can also refuse sampling parameters outright, as the 5.x
  models do.
* Every thinking block the server emits is signed: the signature is an HMAC, keyed by the
  server's secret, of the requested model and the emitted thinking text; a ``redacted_thinking``
  block's ``data`` is signed the same way. The secret is fixed by default, so a restarted
  server (or another process) accepts blocks an earlier one signed, as the real API does.
  The signature also carries a seal over itself, so the server tells an altered signature (or
  one signed for another model, or made up: "Invalid `signature` in `thinking` block") from
  an intact signature over altered text (in the latest assistant message: the API's "cannot
  be modified" message; earlier: invalid signature).
* A thinking block may not be dropped either: with thinking on, when the latest assistant
  message carries a tool call this server sent with thinking blocks, those blocks must come
  back, in order and unchanged (the API's "must start with a thinking block" 400).
* Replies: with thinking disabled the scripted thinking blocks are not emitted; with
  ``display: "omitted"`` a thinking block is emitted with empty text and a signature.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
from collections.abc import Callable
from typing import Any

THINKING_TYPES = ("adaptive", "between_tools", "disabled", "enabled")
THINKING_ON = ("adaptive", "enabled")  # the types under which sampling and tool_choice rules apply
DISPLAYS = ("summarized", "omitted")
EFFORTS = ("low", "medium", "high", "xhigh", "max")
MIN_BUDGET_TOKENS = 1024
DEFAULT_SECRET = b"nb_durable fake Messages API signing key"
_MAGIC = b"FAKESIG1"
_DOCS = "https://docs.claude.com/en/docs/build-with-claude/extended-thinking"
_FIELDS = {"enabled": {"type", "budget_tokens", "display"}, "adaptive": {"type", "display"},
           "between_tools": {"type"}, "disabled": {"type"}}


def _quoted(values: tuple[str, ...]) -> str:
    spelled = [f"'{v}'" for v in values]
    return ", ".join(spelled[:-1]) + f" or {spelled[-1]}"


def thinking_type(body: dict[str, Any], default: str = "disabled") -> str:
    """The request's thinking type; ``default`` when it sends none (model-dependent on the API)."""
    config = body.get("thinking")
    return str(config.get("type")) if isinstance(config, dict) else default


def check_thinking(body: dict[str, Any], *, refuse_sampling: bool = False, endpoint: str = "messages") -> str | None:
    """None if ``thinking``, ``output_config``, sampling and ``tool_choice`` agree, else the 400 message."""
    config = body.get("thinking")
    if config is not None:
        problem = _check_config(config, body.get("max_tokens"), endpoint)
        if problem:
            return problem
    problem = _check_output_config(body.get("output_config"))
    if problem:
        return problem
    on = isinstance(config, dict) and config.get("type") in THINKING_ON
    choice = body.get("tool_choice")
    if on and isinstance(choice, dict) and choice.get("type") in ("any", "tool"):
        return "Thinking may not be enabled when tool_choice forces tool use."
    for name in ("temperature", "top_k", "top_p"):
        if name in body and refuse_sampling:
            return f"`{name}` is not supported on this model; remove it from the request."
    if on and "temperature" in body and body["temperature"] != 1:
        return f"`temperature` may only be set to 1 when thinking is enabled or in adaptive mode. Please consult our documentation at {_DOCS}#feature-compatibility"
    if on and "top_k" in body:
        return f"`top_k` cannot be set when thinking is enabled or in adaptive mode. Please consult our documentation at {_DOCS}#feature-compatibility"
    if on and "top_p" in body and not (isinstance(body["top_p"], int | float) and 0.95 <= body["top_p"] <= 1):
        return f"`top_p` must be between 0.95 and 1, or unset, when thinking is enabled or in adaptive mode. Please consult our documentation at {_DOCS}#feature-compatibility"
    return None


def _check_config(config: Any, max_tokens: Any, endpoint: str) -> str | None:
    if not isinstance(config, dict):
        return "thinking: Input should be a valid dictionary or object to extract fields from"
    kind = config.get("type")
    if kind is None:
        return "thinking: Unable to extract tag using discriminator 'type'"
    if kind not in THINKING_TYPES:
        return f"thinking: Input tag '{kind}' found using 'type' does not match any of the expected tags: {_quoted(THINKING_TYPES)}"
    extra = sorted(set(config) - _FIELDS[kind])
    if extra:
        return f"thinking.{kind}.{extra[0]}: Extra inputs are not permitted"
    if "display" in config and config["display"] is not None and config["display"] not in DISPLAYS:
        return f"thinking.{kind}.display: Input should be {_quoted(DISPLAYS)}"
    if kind == "enabled":
        budget = config.get("budget_tokens")
        if budget is None:
            return "thinking.enabled.budget_tokens: Field required"
        if not isinstance(budget, int) or isinstance(budget, bool):
            return "thinking.enabled.budget_tokens: Input should be a valid integer"
        if budget < MIN_BUDGET_TOKENS:
            return f"thinking.enabled.budget_tokens: Input should be greater than or equal to {MIN_BUDGET_TOKENS}"
        if endpoint == "messages" and isinstance(max_tokens, int) and max_tokens <= budget:
            return f"`max_tokens` must be greater than `thinking.budget_tokens`. Please consult our documentation at {_DOCS}#max-tokens-and-context-window-size"
    return None


def _check_output_config(config: Any) -> str | None:
    if config is None:
        return None
    if not isinstance(config, dict):
        return "output_config: Input should be a valid dictionary or object to extract fields from"
    extra = sorted(set(config) - {"effort", "format"})
    if extra:
        return f"output_config.{extra[0]}: Extra inputs are not permitted"
    effort = config.get("effort")
    if effort is not None and effort not in EFFORTS:
        return f"output_config.effort: Input should be {_quoted(EFFORTS)}"
    return None


# -- signatures --------------------------------------------------------------------------------


class Signer:
    """Signs the thinking blocks a server emits and checks the ones sent back."""

    def __init__(self, secret: bytes | str = DEFAULT_SECRET) -> None:
        self._secret = secret.encode() if isinstance(secret, str) else secret

    def _mac(self, model: str, kind: str, payload: str) -> bytes:
        return hmac.new(self._secret, f"{kind}\0{model}\0{payload}".encode(), hashlib.sha256).digest()

    @staticmethod
    def _tag(model: str) -> bytes:
        return hashlib.sha256(model.encode()).digest()[:8]

    def _seal(self, model: str, mac: bytes) -> bytes:
        """A check of the signature itself, so an altered signature is told from altered text."""
        return self._mac(model, "seal", mac.hex())[:16]

    def sign(self, model: str, thinking: str) -> str:
        """The signature of a thinking block emitted for ``model``."""
        mac = self._mac(model, "thinking", thinking)
        return base64.b64encode(_MAGIC + self._tag(model) + mac + self._seal(model, mac)).decode()

    def redacted_data(self, model: str) -> str:
        """Fresh opaque ``data`` for a redacted_thinking block emitted for ``model``."""
        nonce = secrets.token_bytes(24)
        mac = self._mac(model, "redacted", nonce.hex())
        return base64.b64encode(_MAGIC + self._tag(model) + nonce + mac + self._seal(model, mac)).decode()

    def check(self, model: str, block: dict[str, Any]) -> str:
        """``"ok"``; ``"foreign"`` (not a signature of ours for this model: altered, made up, or
        another model's); or ``"altered"`` (our intact signature, but the thinking text changed)."""
        kind = block.get("type")
        sealed = block.get("signature") if kind == "thinking" else block.get("data")
        try:
            raw = base64.b64decode(str(sealed), validate=True)
        except ValueError:
            return "foreign"
        if not raw.startswith(_MAGIC) or raw[8:16] != self._tag(model) or len(raw) < 16 + 48:
            return "foreign"
        payload, mac, seal = raw[16:-48], raw[-48:-16], raw[-16:]
        if not hmac.compare_digest(seal, self._seal(model, mac)):
            return "foreign"
        if kind == "thinking":
            expected = self._mac(model, "thinking", str(block.get("thinking", "")))
        else:
            expected = self._mac(model, "redacted", payload.hex())
        return "ok" if hmac.compare_digest(mac, expected) else "altered"


def check_history(messages: list[Any], model: str, signer: Signer) -> str | None:
    """None if every thinking block in ``messages`` is one we emitted for ``model``, else the 400."""
    latest = max((i for i, m in enumerate(messages) if isinstance(m, dict) and m.get("role") == "assistant"), default=-1)
    for i, m in enumerate(messages):
        content = m.get("content") if isinstance(m, dict) else None
        for j, b in enumerate(content if isinstance(content, list) else []):
            kind = b.get("type") if isinstance(b, dict) else None
            if kind not in ("thinking", "redacted_thinking"):
                continue
            where = f"messages.{i}.content.{j}"
            if m.get("role") != "assistant":
                return f"{where}: `{kind}` blocks can only be in `assistant` messages"
            field = "signature" if kind == "thinking" else "data"
            if not isinstance(b.get(field), str):
                return f"{where}.{kind}.{field}: Field required"
            if kind == "thinking" and not isinstance(b.get("thinking"), str):
                return f"{where}.thinking.thinking: Field required"
            verdict = signer.check(model, b)
            if verdict == "altered" and i == latest:
                return (f"{where}: `thinking` or `redacted_thinking` blocks in the latest assistant message cannot be "
                        "modified. These blocks must remain as they were in the original response.")
            if verdict != "ok":
                return f"{where}: Invalid `{field}` in `{kind}` block"
    return None


THINKING_BLOCKS = ("thinking", "redacted_thinking")
_MUST_START = (
    "When `thinking` is enabled, a final `assistant` message must start with a thinking block (preceeding the "
    "lastmost set of `tool_use` and `tool_result` blocks). We recommend you include thinking blocks from previous "
    f"turns. To avoid this requirement, disable `thinking`. Please consult our documentation at {_DOCS}"
)


def check_kept(body: dict[str, Any], sent: Callable[[str], list[dict[str, Any]] | None], default: str = "disabled") -> str | None:
    """None unless the latest assistant message dropped or changed thinking blocks the server sent with its tool calls.

    ``sent(tool_use_id)`` is the content of the reply that carried that tool call (None when
    unknown, e.g. after a restart, so nothing is checked).
    """
    if thinking_type(body, default) == "disabled":
        return None
    given = body.get("messages")
    messages: list[Any] = given if isinstance(given, list) else []
    latest = max((i for i, m in enumerate(messages) if isinstance(m, dict) and m.get("role") == "assistant"), default=None)
    if latest is None or not isinstance(messages[latest].get("content"), list):
        return None
    content = [b for b in messages[latest]["content"] if isinstance(b, dict)]
    for call in (b for b in content if b.get("type") == "tool_use"):
        original = sent(str(call.get("id")))
        if original is None:
            continue
        want = [b for b in original if b.get("type") in THINKING_BLOCKS]
        have = [b for b in content if b.get("type") in THINKING_BLOCKS]
        if want and not have:
            return f"messages.{latest}.content.0.type: Expected `thinking` or `redacted_thinking`, but found `{content[0].get('type')}`. {_MUST_START}"
        if want and have != want:
            return (f"messages.{latest}: `thinking` or `redacted_thinking` blocks in the latest assistant message cannot be "
                    "modified. These blocks must remain as they were in the original response.")
        return None
    return None


def render_thinking(content: list[dict[str, Any]], body: dict[str, Any], model: str, signer: Signer, default: str) -> list[dict[str, Any]]:
    """The reply's blocks as emitted under the request's thinking config: signed, omitted or dropped."""
    kind = thinking_type(body, default)
    config = body.get("thinking")
    display = config.get("display") if isinstance(config, dict) else None
    out: list[dict[str, Any]] = []
    for block in content:
        if block.get("type") not in ("thinking", "redacted_thinking"):
            out.append(block)
        elif kind == "disabled":
            continue
        elif block["type"] == "redacted_thinking":
            out.append({"type": "redacted_thinking", "data": block.get("data") or signer.redacted_data(model)})
        else:
            said = "" if display == "omitted" else str(block.get("thinking", ""))
            out.append({"type": "thinking", "thinking": said, "signature": block.get("signature") or signer.sign(model, said)})
    return out
