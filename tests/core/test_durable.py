"""Plain Python functions as steps of a named run."""

from __future__ import annotations

import functools
import importlib.util
import re
import warnings
from collections.abc import Callable
from datetime import date
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from nb_durable import DivergenceError, durable_run, read_run, request_hash, step
from nb_durable.errors import SharedStepNameWarning


def test_step_functions_are_recorded_and_replayed(tmp_path: Path) -> None:
    calls: list[str] = []

    @step
    def double(x: int) -> int:
        calls.append(f"double {x}")
        return 2 * x

    @step(effect="external")
    def publish(x: int) -> str:
        calls.append(f"publish {x}")
        return f"published {x}"

    for _ in range(2):
        with durable_run("pipeline", tmp_path):
            a = double(1)
            b = double(a)
            c = publish(b)
    assert (a, b, c) == (2, 4, "published 4")
    assert calls == ["double 1", "double 2", "publish 4"]
    record = read_run("pipeline", tmp_path)
    assert [s.step_id for s in record.steps] == [
        f"{double.__qualname__}:1",
        f"{double.__qualname__}:2",
        f"{publish.__qualname__}:1",
    ]
    assert record.summary.status == "completed"


def test_outside_a_run_a_step_is_an_ordinary_function(tmp_path: Path) -> None:
    @step
    def plain(x: int) -> int:
        return x + 1

    assert plain(1) == 2


def test_changed_arguments_are_a_divergence(tmp_path: Path) -> None:
    @step(name="load")
    def load(path: str) -> str:
        return path.upper()

    with durable_run("args", tmp_path):
        load("a.csv")
    with pytest.raises(DivergenceError, match="different request"):
        with durable_run("args", tmp_path):
            load("b.csv")
    assert read_run("args", tmp_path).summary.status == "failed"


def test_nested_steps_run_inside_the_outer_step_unrecorded(tmp_path: Path) -> None:
    @step
    def inner() -> int:
        return 1

    @step
    def outer() -> int:
        return inner() + 1

    with durable_run("nest", tmp_path):
        assert outer() == 2
    assert [s.step_id.split(".")[-1] for s in read_run("nest", tmp_path).steps] == ["outer:1"]


def test_an_exception_finishes_the_run_as_failed_and_it_resumes(tmp_path: Path) -> None:
    state = {"broken": True}

    @step
    def risky() -> str:
        if state["broken"]:
            raise RuntimeError("disk full")
        return "fine"

    with pytest.raises(RuntimeError):
        with durable_run("resume", tmp_path):
            risky()
    summary = read_run("resume", tmp_path).summary
    assert (summary.status, summary.error) == ("failed", "RuntimeError: disk full")
    state["broken"] = False
    with durable_run("resume", tmp_path):
        assert risky() == "fine"
    assert read_run("resume", tmp_path).summary.status == "completed"


def test_a_method_step_is_pinned_by_its_arguments_despite_self(tmp_path: Path) -> None:
    # self is no JSON: the call was left unpinned, so other arguments replayed the recorded result.
    class Tracker:
        def __init__(self) -> None:
            self.opened = 0  # state a replay never rebuilds: self is pinned by its type alone

        @step(effect="external")
        def open_ticket(self, title: str) -> str:
            self.opened += 1
            return f"ticket {title}"

    with durable_run("tickets", tmp_path):
        Tracker().open_ticket("flaky test")
    with durable_run("tickets", tmp_path):
        assert Tracker().open_ticket("flaky test") == "ticket flaky test"
    with pytest.raises(DivergenceError, match="Tracker.open_ticket:1 .*different request"):
        with durable_run("tickets", tmp_path):
            Tracker().open_ticket("another test")


@pytest.mark.parametrize(
    ("first", "then"),
    [
        (Path("a.csv"), Path("b.csv")),
        (b"one", b"two"),
        ({"a", "b"}, {"a", "c"}),
        (date(2026, 1, 1), date(2026, 1, 2)),
        ([Path("a.csv"), 1], [Path("a.csv"), 2]),
    ],
)
def test_arguments_json_cannot_hold_still_pin_the_step(tmp_path: Path, first: object, then: object) -> None:
    @step(name="load")
    def load(source: object) -> str:
        return "loaded"

    with durable_run("values", tmp_path):
        load(first)
    with durable_run("values", tmp_path):
        assert load(first) == "loaded"
    with pytest.raises(DivergenceError, match="different request"):
        with durable_run("values", tmp_path):
            load(then)


def test_json_arguments_hash_as_logs_recorded_before_recorded_them(tmp_path: Path) -> None:
    @step(name="load")
    def load(path: str, *, rows: int) -> str:
        return path

    with durable_run("json-args", tmp_path):
        load("a.csv", rows=3)
    assert read_run("json-args", tmp_path).steps[0].hash == request_hash([["a.csv"], {"rows": 3}])


def test_a_step_called_from_another_thread_of_the_run_is_refused_not_numbered_by_chance(tmp_path: Path) -> None:
    """asyncio.to_thread hands the run's context to its thread (copy_context().run, as here):
    steps called there were numbered in whatever order the threads started them, and the
    counter itself was shared unguarded."""
    import contextvars
    import threading

    from nb_durable.errors import RunError

    @step
    def fetch(url: str) -> str:
        return url.upper()

    raised: list[BaseException] = []

    def in_the_runs_context(context: contextvars.Context) -> None:
        try:
            context.run(fetch, "a")
        except BaseException as e:
            raised.append(e)

    with durable_run("par", tmp_path):
        thread = threading.Thread(target=in_the_runs_context, args=(contextvars.copy_context(),))
        thread.start()
        thread.join()
    assert len(raised) == 1 and isinstance(raised[0], RunError), raised
    assert re.search(r"step '.*fetch' of run 'par' was called from another thread than the run's", str(raised[0])), raised
    with durable_run("one-each", tmp_path):
        assert fetch("a") == "A"  # the run's own thread still records
    assert read_run("one-each", tmp_path).summary.steps == 1


@pytest.mark.parametrize(
    ("recorded", "replayed"),
    [
        ((("a",), {}), ((), {"path": "a"})),
        (((), {"path": "a"}), (("a",), {})),
        ((("a", 2), {}), (("a",), {"rows": 2})),
        ((("a",), {"rows": 2, "sep": ";"}), ((), {"sep": ";", "path": "a", "rows": 2})),
    ],
)
def test_a_call_by_keyword_or_by_position_is_the_same_step(
    tmp_path: Path, recorded: tuple[tuple[object, ...], dict[str, object]], replayed: tuple[tuple[object, ...], dict[str, object]]
) -> None:
    """A call recorded as load(path="a") and replayed as load("a") binds the same arguments:
    it raised DivergenceError, a different request."""
    calls: list[object] = []

    @step
    def load(path: str, rows: int = 1, *, sep: str = ",") -> str:
        calls.append(path)
        return f"{path} x{rows}{sep}"

    with durable_run("binds", tmp_path):
        first = load(*recorded[0], **recorded[1])  # type: ignore[arg-type]
    with durable_run("binds", tmp_path):
        assert load(*replayed[0], **replayed[1]) == first  # type: ignore[arg-type]
    assert calls == ["a"]


def test_an_argument_left_to_its_default_is_not_the_default_passed(tmp_path: Path) -> None:
    """Defaults are not applied: a default changed between record and replay is not taken for the recorded call."""

    @step
    def load(path: str, rows: int = 1) -> str:
        return path

    with durable_run("defaults", tmp_path):
        load("a")
    with pytest.raises(DivergenceError, match="different request"):
        with durable_run("defaults", tmp_path):
            load("a", 1)


def test_the_common_call_shape_hashes_as_before(tmp_path: Path) -> None:
    """Positional arguments, then keyword-only ones: the hash 0.1 recorded, for a named step."""

    @step(name="load")
    def load(path: str, rows: int = 1, *, sep: str = ",") -> str:
        return path

    with durable_run("shape", tmp_path):
        load("a.csv", 3, sep=";")
        load(path="b.csv")
    hashes = [s.hash for s in read_run("shape", tmp_path).steps]
    assert hashes == [request_hash([["a.csv", 3], {"sep": ";"}]), request_hash([["b.csv"], {}])]


def old_log(tmp_path: Path, run_id: str, steps: list[tuple[str, object, object]]) -> None:
    """A run recorded as nb_durable before this version recorded its @step calls: each step's
    id, its request as the call made it ([args, kwargs]) and its result."""
    from nb_durable import EventLog, run_step

    with EventLog(run_id, tmp_path) as log:
        log.start_run()
        for step_id, request, result in steps:
            run_step(log, step_id, lambda result=result: result, request=request)  # type: ignore[misc]
        log.finish_run("completed")


def test_a_log_recorded_with_keywords_before_still_replays(tmp_path: Path) -> None:
    @step
    def load(path: str, rows: int = 1) -> str:
        raise AssertionError("replaying a recorded step ran it")

    old_log(tmp_path, "kw", [(f"{load.__qualname__}:1", [[], {"path": "a", "rows": 2}], "A")])
    with durable_run("kw", tmp_path):
        assert load(path="a", rows=2) == "A"


@pytest.mark.parametrize(
    ("request_recorded", "replayed"),
    [
        ([[], {"path": "a", "rows": 2}], (("a", 2), {})),
        ([[], {"path": "a", "rows": 2}], (("a",), {"rows": 2})),
        ([["a"], {"rows": 2}], (("a", 2), {})),
        ([["a"], {"rows": 2, "sep": ";"}], (("a", 2), {"sep": ";"})),
    ],
)
def test_a_log_recorded_with_keywords_before_replays_a_call_by_position(
    tmp_path: Path, request_recorded: object, replayed: tuple[tuple[object, ...], dict[str, object]]
) -> None:
    """A call recorded as load(path="a", rows=2) by a version that hashed calls as made, then
    made as load("a", 2), raised DivergenceError: only the call as made was tried against the
    recorded hash, and that is the bound one here."""

    @step
    def load(path: str, rows: int = 1, *, sep: str = ",") -> str:
        raise AssertionError("replaying a recorded step ran it")

    old_log(tmp_path, "kw", [(f"{load.__qualname__}:1", request_recorded, "A")])
    with durable_run("kw", tmp_path):
        assert load(*replayed[0], **replayed[1]) == "A"  # type: ignore[arg-type]


def test_other_arguments_still_diverge_whatever_way_they_are_passed(tmp_path: Path) -> None:
    """The spellings tried are of the same arguments: another value, or one too many for
    ``*args`` to be named, is still a different request."""

    @step
    def load(path: str, *more: str) -> str:
        raise AssertionError("replaying a recorded step ran it")

    old_log(tmp_path, "kw", [(f"{load.__qualname__}:1", [[], {"path": "a"}], "A"), (f"{load.__qualname__}:2", [["a", "b"], {}], "B")])
    with pytest.raises(DivergenceError, match="different request"):
        with durable_run("kw", tmp_path):
            load("b")
    with durable_run("kw", tmp_path):
        assert load("a") == "A"
        assert load("a", "b") == "B"
    with pytest.raises(DivergenceError, match="different request"):
        with durable_run("kw", tmp_path):
            assert load("a") == "A"
            load("a", "c")


def _module(path: Path, name: str, source: str) -> ModuleType:
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_two_functions_called_as_one_step_name_are_warned_of_while_the_run_is_recorded(tmp_path: Path) -> None:
    """Two unnamed functions of one qualified name in two modules share a numbering, and a replay
    that swapped them handed each the other's recorded result without a word (the module is
    kept out of the id and the hash: a function moved into a file stays the same step)."""
    source = "from nb_durable import step\n\n@step\ndef fetch(x):\n    return '{}:' + x\n"
    pages = _module(tmp_path / "pages.py", "pages_mod", source.format("pages"))
    feeds = _module(tmp_path / "feeds.py", "feeds_mod", source.format("feeds"))
    with pytest.warns(SharedStepNameWarning) as warned, durable_run("two", tmp_path):
        pages.fetch("u")
        feeds.fetch("u")
        feeds.fetch("v")  # once per name and run
    assert [str(w.message) for w in warned] == [
        "run 'two': pages_mod.fetch (line 3) and feeds_mod.fetch (line 3) are both step 'fetch' and share its "
        "numbering (fetch:1, fetch:2, ...), so a replay that calls them in another order with the same arguments "
        "hands each the other's recorded result. Give each its own name (@step(name=...)); a run recorded with "
        "them sharing one replays only in the order it was recorded."
    ]
    assert warned[0].filename == __file__  # pointed at the code that called it


def test_one_function_or_closures_of_one_are_one_step_and_not_warned_of(tmp_path: Path) -> None:
    def maker(scale: int) -> Callable[[int], int]:
        @step
        def scaled(x: int) -> int:
            return scale * x

        return scaled

    with warnings.catch_warnings():
        warnings.simplefilter("error", SharedStepNameWarning)
        with durable_run("one", tmp_path):
            assert (maker(2)(1), maker(2)(2), maker(3)(1)) == (2, 4, 3)


_CELL = "@step\ndef fetch(x):\n    return x * {}\n"


def _run_cell(source: str, namespace: dict[str, Any]) -> Callable[[int], int]:
    """A notebook cell run (again): its code compiled afresh into the kernel's one namespace."""
    exec(compile(source, "<cell>", "exec"), namespace)
    fetch: Callable[[int], int] = namespace["fetch"]
    return fetch


def test_a_step_defined_again_by_a_cell_run_again_is_one_step_and_not_warned_of(tmp_path: Path) -> None:
    """A cell run again compiles its function anew: another code object, equal to the first,
    over the same globals. Warned of, it named one function twice: '__main__.fetch (line 1) and
    __main__.fetch (line 1) are both step ...'."""
    namespace: dict[str, Any] = {"step": step, "__name__": "__main__"}
    with warnings.catch_warnings():
        warnings.simplefilter("error", SharedStepNameWarning)
        with durable_run("cell-again", tmp_path):
            assert _run_cell(_CELL.format(2), namespace)(1) == 2
            assert _run_cell(_CELL.format(2), namespace)(2) == 4


def test_a_step_defined_again_with_other_code_is_warned_of_in_words_that_tell_the_two_apart(tmp_path: Path) -> None:
    namespace: dict[str, Any] = {"step": step, "__name__": "__main__"}
    with pytest.warns(SharedStepNameWarning) as warned, durable_run("cell-changed", tmp_path):
        _run_cell(_CELL.format(2), namespace)(1)
        _run_cell(_CELL.format(3), namespace)(1)
    assert str(warned[0].message).startswith(
        "run 'cell-changed': __main__.fetch (line 1) and its definition run again with other code are both step 'fetch'"
    )


def _retried(fn: Callable[[str], str]) -> Callable[[str], str]:
    """A retrying decorator of a library: one wrapper code, whichever function it wraps."""

    @functools.wraps(fn)
    def again(x: str) -> str:
        return fn(x)

    return again


def test_steps_under_a_decorator_are_told_apart_by_the_functions_they_wrap(tmp_path: Path) -> None:
    """A decorator's wrapper is one code for every function it wraps: compared as they were,
    two functions under one were one step (never warned of), and one decorated again in a loop
    by ``lru_cache`` (no code of its own) two."""
    source = "@step\n@_retried\ndef fetch(x):\n    return '{}:' + x\n"
    pages: dict[str, Any] = {"step": step, "_retried": _retried, "__name__": "pages"}
    feeds: dict[str, Any] = {**pages, "__name__": "feeds"}
    exec(compile(source.format("pages"), "pages.py", "exec"), pages)
    exec(compile(source.format("feeds"), "feeds.py", "exec"), feeds)
    with pytest.warns(SharedStepNameWarning) as warned, durable_run("wrapped", tmp_path):
        pages["fetch"]("u")
        feeds["fetch"]("u")
    assert str(warned[0].message).startswith("run 'wrapped': pages.fetch (line 1) and feeds.fetch (line 1) are both step 'fetch'")

    with warnings.catch_warnings():
        warnings.simplefilter("error", SharedStepNameWarning)
        with durable_run("wrapped-again", tmp_path):
            for i in range(3):

                @step
                @functools.lru_cache
                def cached(x: int) -> int:
                    return x

                assert cached(i) == i
