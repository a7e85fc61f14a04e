"""The flags several magics share (model, limits, budgets) and the checks on what they were given.

Written once so ``%%agent`` and ``%agent_resume`` offer the same flags with the same help and
refuse the same mistakes with ``UsageError``.
"""

from __future__ import annotations

from typing import Any

from IPython.core.error import UsageError
from IPython.core.magic_arguments import argument

from ..agent.settings import CACHE_TTLS, THINKING_MODES

__all__ = ["LIMITS", "MODEL", "PLACE", "changes", "check_crash_at", "check_limits", "in_background", "with_flags"]


def check_crash_at(value: int | None) -> None:
    if value is not None and value < 1:
        raise UsageError(f"--crash-at counts steps from 1, not {value}")


def check_limits(args: Any) -> None:
    counts = {"--max-tokens": args.max_tokens, "--max-run-tokens": args.max_run_tokens}
    counts |= {"--max-concurrent-calls": args.max_concurrent_calls, "--tokens-per-minute": args.tokens_per_minute}
    for flag, value in counts.items():
        if value is not None and value < 1:
            raise UsageError(f"{flag} must be at least 1, not {value}")
    if args.max_usd is not None and not args.max_usd > 0:
        raise UsageError(f"--max-usd must be a positive number of dollars, not {args.max_usd}")


def changes(args: Any) -> dict[str, Any]:
    """What a resume or continue asks to change (None: keep what the run recorded)."""
    return {
        "model": getattr(args, "model", None),
        "max_tokens": getattr(args, "max_tokens", None),
        "thinking": getattr(args, "thinking", None),
        "cache_ttl": args.cache_ttl,
        "max_usd": args.max_usd,
        "max_run_tokens": args.max_run_tokens,
    }


LIMITS = (
    argument("--cache-ttl", choices=CACHE_TTLS, help="how long the API caches the conversation between turns, or off"),
    argument("--max-usd", metavar="X", type=float, help="stop before a model call that could take the run past $X"),
    argument("--max-run-tokens", metavar="N", type=int, help="stop before a model call that could take the run past N tokens"),
    argument("--max-concurrent-calls", metavar="N", type=int, help="at most N model calls at once per endpoint, shared through the store"),
    argument("--tokens-per-minute", metavar="N", type=int, help="at most N input tokens a minute per endpoint, shared through the store"),
)
PLACE = (
    argument(
        "--background",
        action="store_true",
        help="return at once and run in a thread of the kernel: the notebook stays free and the timeline's buttons work",
    ),
    argument("--foreground", action="store_true", help="hold the kernel for the run (the default, unless AgentMagics.background)"),
)


def in_background(args: Any, default: bool) -> bool:
    """Whether the run goes on in the background: the flags, else the ``background`` setting."""
    if args.background and args.foreground:
        raise UsageError("--background and --foreground contradict each other: give one")
    return bool(args.background or (default and not args.foreground))


MODEL = (
    argument("--model", metavar="M", help="the Claude model (default: AgentMagics.model)"),
    argument("--max-tokens", metavar="N", type=int, help="max_tokens of each model call; thinking counts against it"),
    argument("--thinking", choices=THINKING_MODES, help="adaptive thinking (shown between tools), or off for models without it"),
)


def with_flags(*decorators: Any) -> Any:
    """Apply several ``@argument``s at once (shared by the magics that take the same flags)."""

    def apply(fn: Any) -> Any:
        for decorator in reversed(decorators):
            fn = decorator(fn)
        return fn

    return apply
