"""Plain Python, durably: ``durable_run`` makes calls of ``@step`` functions steps of a run.

    @step
    def fetch(url): ...

    with durable_run("nightly"):
        page = fetch("https://example.org")     # recorded; replayed after a crash

A step's id is the function's qualified name and the number of the call within the run
(``fetch:1``, ``fetch:2``), and its arguments, when they are JSON, pin its request hash, so a
replay that calls it with other arguments raises ``DivergenceError``. Outside a durable run
a ``@step`` function is an ordinary function, and a step called inside another step runs
inside it, unrecorded (the outer step's result already covers it).
"""

from __future__ import annotations

import functools
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, ParamSpec, TypeVar, overload

from .codec import request_hash
from .context import current_step
from .events import Effect
from .in_doubt import InDoubtPolicy
from .log import EventLog, run_step
from .stores import StoreSpec
from .writer import Durability

__all__ = ["durable_run", "step"]

P = ParamSpec("P")
R = TypeVar("R")

_active: ContextVar[EventLog | None] = ContextVar("nb_durable_active_run", default=None)
_calls: weakref.WeakKeyDictionary[EventLog, dict[str, int]] = weakref.WeakKeyDictionary()


@contextmanager
def durable_run(
    run_id: str,
    root: StoreSpec = None,
    *,
    durability: Durability = "full",
    in_doubt: InDoubtPolicy = "fail",
    settings: dict[str, Any] | None = None,
) -> Iterator[EventLog]:
    """Open a run for ``@step`` functions; record how it ended when the block exits."""
    with EventLog(run_id, root, durability=durability, in_doubt=in_doubt) as log:
        log.start_run(settings)
        token = _active.set(log)
        try:
            yield log
        except KeyboardInterrupt:
            log.finish_run("interrupted")
            raise
        except BaseException as e:
            if log.writable:
                log.finish_run("failed", error=f"{type(e).__name__}: {e}")
            raise
        else:
            log.finish_run("completed")
        finally:
            _active.reset(token)


@overload
def step(fn: Callable[P, R], /) -> Callable[P, R]: ...
@overload
def step(
    *,
    effect: Effect = "pure",
    name: str | None = None,
    in_doubt: InDoubtPolicy | None = None,
    check: Callable[..., Any] | None = None,
) -> Callable[[Callable[P, R]], Callable[P, R]]: ...
def step(
    fn: Callable[P, R] | None = None,
    /,
    *,
    effect: Effect = "pure",
    name: str | None = None,
    in_doubt: InDoubtPolicy | None = None,
    check: Callable[..., Any] | None = None,
) -> Any:
    """Make each call of ``fn`` inside a ``durable_run`` a recorded step.

    ``check``, called with the same arguments, settles an in-doubt call by looking at the
    world: it returns the result if the effect happened and None if it did not.
    """

    def decorate(fn: Callable[P, R]) -> Callable[P, R]:
        base = name or fn.__qualname__

        @functools.wraps(fn)
        def call(*args: P.args, **kwargs: P.kwargs) -> R:
            log = _active.get()
            if log is None or current_step() is not None:
                return fn(*args, **kwargs)
            counts = _calls.setdefault(log, {})
            counts[base] = number = counts.get(base, 0) + 1
            try:
                digest: str | None = request_hash([list(args), kwargs])
            except (TypeError, ValueError):
                digest = None  # arguments JSON cannot hold are not pinned
            return run_step(
                log,
                f"{base}:{number}",
                lambda: fn(*args, **kwargs),
                effect=effect,
                request_hash=digest,
                in_doubt=in_doubt,
                check=None if check is None else lambda: check(*args, **kwargs),
            )

        return call

    return decorate(fn) if fn is not None else decorate
