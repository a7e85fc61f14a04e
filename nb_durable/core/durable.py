"""Plain Python, durably: ``durable_run`` makes calls of ``@step`` functions steps of a run.

    @step
    def fetch(url): ...

    with durable_run("nightly"):
        page = fetch("https://example.org")     # recorded; replayed after a crash

A step's id is the function's qualified name and the number of the call within the run
(``fetch:1``, ``fetch:2``), and its arguments pin its request hash, so a replay that calls it
with other arguments raises ``DivergenceError``: JSON values, paths, bytes, dates, enums, sets
and frozen dataclasses by value, any other object (a method's ``self``, a client) by its type alone,
since its state may differ on a replay that never ran the steps before. The arguments are
hashed as they bind to the function's parameters (``f("a")`` and ``f(p="a")`` are one call),
defaults not applied. Outside a durable run
a ``@step`` function is an ordinary function, and a step called inside another step runs
inside it, unrecorded (the outer step's result already covers it).
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import enum
import functools
import hashlib
import inspect
import os
import threading
import warnings
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, ParamSpec, TypeVar, overload

from ..errors import RunError, SharedStepNameWarning, stacklevel_outside_package
from .codec import request_hash
from .context import current_step
from .events import Effect
from .in_doubt import InDoubtPolicy
from .log import EventLog, run_step
from .stores import StoreSpec
from .writing.writer import Durability

__all__ = ["arguments_hash", "durable_run", "step"]

P = ParamSpec("P")
R = TypeVar("R")

_active: ContextVar[EventLog | None] = ContextVar("nb_durable_active_run", default=None)
_calls: weakref.WeakKeyDictionary[EventLog, dict[str, int]] = weakref.WeakKeyDictionary()
_firsts: weakref.WeakKeyDictionary[EventLog, dict[str, Callable[..., Any] | None]] = weakref.WeakKeyDictionary()
"""The first function each step name of a run was called as (None once a second was warned of)."""
_owners: weakref.WeakKeyDictionary[EventLog, int] = weakref.WeakKeyDictionary()
"""The thread each durable run's block runs in: its steps are numbered in call order, which
only one thread keeps from one run to its replay."""


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
        _owners[log] = threading.get_ident()
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
        signature = _signature(fn)

        @functools.wraps(fn)
        def call(*args: P.args, **kwargs: P.kwargs) -> R:
            log = _active.get()
            if log is None or current_step() is not None:
                return fn(*args, **kwargs)
            if _owners.get(log) != threading.get_ident():
                # A thread given the run's context (asyncio.to_thread, copy_context().run): its
                # steps would be numbered in whatever order the threads happen to start them.
                raise RunError(
                    f"step {base!r} of run {log.run_id!r} was called from another thread than the run's: "
                    "steps are numbered in the order they are called, which threads do not repeat on a "
                    "replay. Call a run's steps from the thread that runs it (or make each parallel "
                    "task its own durable run).",
                    run_id=log.run_id,
                )
            _warn_if_shared(log, base, fn)
            counts = _calls.setdefault(log, {})
            counts[base] = number = counts.get(base, 0) + 1
            return run_step(
                log,
                f"{base}:{number}",
                lambda: fn(*args, **kwargs),
                effect=effect,
                request_hash=_call_hash(log, signature, args, kwargs),
                in_doubt=in_doubt,
                check=None if check is None else lambda: check(*args, **kwargs),
            )

        return call

    return decorate(fn) if fn is not None else decorate


def _warn_if_shared(log: EventLog, base: str, fn: Callable[..., Any]) -> None:
    """Warn, once per name and run, when a second function is called as step ``base``.

    Their calls share one numbering and only their arguments pin them, so a replay that calls
    them in another order hands each the other's recorded result. The module is not in the
    id or the hash (a function moved out of a notebook into a file stays the same step), so
    this is said while the run is recorded, when naming the steps still costs nothing."""
    firsts = _firsts.setdefault(log, {})
    first = firsts.setdefault(base, fn)
    if first is None or first is fn or _same(first, fn):
        return
    firsts[base] = None
    was, now = _where(first), _where(fn)
    if now == was:  # a notebook cell run again with its function changed: one name, two codes
        now = "its definition run again with other code"
    warnings.warn(
        SharedStepNameWarning(
            f"run {log.run_id!r}: {was} and {now} are both step {base!r} and share its "
            f"numbering ({base}:1, {base}:2, ...), so a replay that calls them in another order with the "
            "same arguments hands each the other's recorded result. Give each its own name "
            "(@step(name=...)); a run recorded with them sharing one replays only in the order it was recorded."
        ),
        stacklevel=stacklevel_outside_package(),
    )


def _same(first: Callable[..., Any], fn: Callable[..., Any]) -> bool:
    """Whether two functions are one step's: closures of one function, or one definition made
    again (a notebook cell run again, a decorator such as ``lru_cache`` applied in a loop), which
    is code equal to the first's over the same globals. Compared under their decorators' wrappers
    (``__wrapped__``): one decorator's wrapper is one code for every function it wraps."""
    first, fn = inspect.unwrap(first), inspect.unwrap(fn)
    code, other = getattr(first, "__code__", first), getattr(fn, "__code__", fn)
    return code is other or (code == other and getattr(first, "__globals__", None) is getattr(fn, "__globals__", ()))


def _where(fn: Callable[..., Any]) -> str:
    code = getattr(inspect.unwrap(fn), "__code__", None)
    line = f" (line {code.co_firstlineno})" if code is not None else ""
    return f"{getattr(fn, '__module__', None) or '?'}.{fn.__qualname__}{line}"


def _signature(fn: Callable[..., Any]) -> inspect.Signature | None:
    try:
        return inspect.signature(fn)
    except (TypeError, ValueError):  # a callable Python cannot describe: its calls hash as made
        return None


def _call_hash(log: EventLog, signature: inspect.Signature | None, args: tuple[Any, ...], kwargs: dict[str, Any]) -> str:
    """The request hash of a ``@step`` call as its arguments bind to the function's parameters
    (positional where they can be, defaults not applied, so a changed default is not taken
    for the recorded call), or the hash of the call as made if the step recorded at the
    cursor has that one: logs recorded before calls were bound still replay."""
    bound = None
    if signature is not None:
        with contextlib.suppress(TypeError):  # the call itself raises when it runs
            bound = signature.bind(*args, **kwargs)
    digest = arguments_hash(*((bound.args, bound.kwargs) if bound is not None else (args, kwargs)))
    if log.replaying and bound is not None:
        recorded = log.writer.history.hash_at(log.cursor)
        if recorded not in (None, digest) and any(arguments_hash(a, k) == recorded for a, k in _spellings(bound, args, kwargs)):
            return recorded
    return digest


def _spellings(bound: inspect.BoundArguments, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Iterator[tuple[tuple[Any, ...], dict[str, Any]]]:
    """The other ways a call of these arguments could have been made, as a log recorded before
    calls were bound hashed it: as made now, then with the last 1, 2, ... of the arguments
    passed by position named instead (``f(p="a")`` recorded, ``f("a")`` replayed)."""
    yield args, kwargs
    named = dict(bound.kwargs)
    positional = list(bound.args)
    parameters = list(bound.signature.parameters.values())
    while positional:
        at = len(positional) - 1
        if at >= len(parameters) or parameters[at].kind is not inspect.Parameter.POSITIONAL_OR_KEYWORD:
            return  # one of *args, or a positional-only one: no call could have named it
        parameter = parameters[at]
        named[parameter.name] = positional.pop()
        yield tuple(positional), named


def arguments_hash(args: tuple[Any, ...], kwargs: dict[str, Any]) -> str:
    """The request hash of a ``@step`` call: its arguments as JSON, or stood in for where
    JSON cannot hold them (``_pinned``)."""
    try:
        # Arguments JSON holds hash as they always did, so logs recorded earlier still replay.
        return request_hash([list(args), kwargs])
    except (TypeError, ValueError):
        # Not leaving the call unpinned: a method's self made every argument of it unchecked,
        # so a replay with other arguments was handed the recorded result without a word.
        return request_hash([_pinned(list(args)), _pinned(kwargs)])


def _pinned(value: Any, depth: int = 0) -> Any:
    """``value`` as JSON that changes when it does, as far as a replay can tell."""
    if value is None or isinstance(value, (str, bool, int)):
        return value
    if isinstance(value, float):
        return value if value - value == 0 else repr(value)  # NaN and infinities
    if depth > 64:
        return "<deep>"
    if isinstance(value, (list, tuple)):
        return [_pinned(v, depth + 1) for v in value]
    if isinstance(value, dict):
        return {str(k): _pinned(v, depth + 1) for k, v in value.items()}
    if isinstance(value, (set, frozenset)):
        return {"set": sorted((_pinned(v, depth + 1) for v in value), key=repr)}
    if isinstance(value, os.PathLike):
        return {"path": os.fsdecode(os.fspath(value))}
    if isinstance(value, (bytes, bytearray, memoryview)):
        return {"bytes": hashlib.sha256(value).hexdigest()}
    if isinstance(value, enum.Enum):
        return {"enum": type(value).__qualname__, "value": _pinned(value.value, depth + 1)}
    if isinstance(value, (datetime.date, datetime.time, datetime.timedelta)):
        return {type(value).__name__: str(value)}
    if dataclasses.is_dataclass(value) and not isinstance(value, type) and value.__dataclass_params__.frozen:  # type: ignore[attr-defined]
        fields = {f.name: _pinned(getattr(value, f.name), depth + 1) for f in dataclasses.fields(value)}
        return {"dataclass": type(value).__qualname__, "fields": fields}
    # Any other object (a mutable dataclass too) by its type: its state (a cache, a counter)
    # may differ on a replay that never ran the steps before it, and a repr may hold an address.
    return {"object": type(value).__qualname__}
