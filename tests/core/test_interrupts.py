"""Ctrl-C that lands just as a store has taken a line leaves a whole log, not a reused sequence number.

The kernel's interrupt button is a SIGINT; its KeyboardInterrupt comes between two bytecodes,
so it can land after a store's fsync or commit returned and before the writer counted the line.
Here a real SIGINT is sent from inside the store's append, after the line is stored: the
same place a person's Ctrl-C lands by chance (seen in a notebook: a run interrupted there read
as torn, line 11 holding sequence number 9, on every later read).
"""

from __future__ import annotations

import functools
import os
import signal
import sys
import threading
import time
import warnings
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from nb_durable import durable_run, read_run, run_step
from nb_durable.core.stores.jsonl import _JsonlWriter
from nb_durable.core.stores.sqlite import _SqliteWriter
from nb_durable.core.writing.interrupts import interrupts_held
from tests import forkserver
from tests.conftest import subprocess_env

WRITERS: dict[str, Any] = {"jsonl": _JsonlWriter, "sqlite": _SqliteWriter}


@pytest.fixture(autouse=True)
def python_handles_ctrl_c() -> Iterator[None]:
    """Ctrl-C raises KeyboardInterrupt, as in a kernel or a terminal: a test run in this process
    before may have left another handler (a CLI command run in-process leaves its own)."""
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, before)


def spec_of(kind: str, tmp_path: Path) -> str:
    return str(tmp_path / "runs") if kind == "jsonl" else f"sqlite:///{tmp_path / 'runs.db'}"


def at_second_append(monkeypatch: pytest.MonkeyPatch, kind: str, act: Callable[[], None], *, stored_first: bool) -> None:
    """Have ``act`` (a press) happen at the store's second append: once it is stored
    (``stored_first``), or while it is on its way (before the store writes it)."""
    writer = WRITERS[kind]
    real = writer.append
    appends = []

    def append(self: Any, lines: Sequence[bytes], first_seq: int, **kwargs: Any) -> None:
        if stored_first:
            real(self, lines, first_seq, **kwargs)
        appends.append(first_seq)
        if len(appends) == 2:
            act()
        if not stored_first:
            real(self, lines, first_seq, **kwargs)

    monkeypatch.setattr(writer, "append", append)


@pytest.mark.parametrize("kind", sorted(WRITERS))
def test_ctrl_c_as_a_line_is_stored_leaves_every_sequence_number_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    # The first step's result is stored: the person presses Ctrl-C now.
    at_second_append(monkeypatch, kind, lambda: os.kill(os.getpid(), signal.SIGINT), stored_first=True)
    spec = spec_of(kind, tmp_path)
    with pytest.raises(KeyboardInterrupt), durable_run("pressed", spec) as log:
        for i in range(4):
            run_step(log, f"s{i}", functools.partial(int, i))
    monkeypatch.undo()

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a line dropped as torn would be a warning
        run = read_run("pressed", spec)
    assert [e.seq for e in run.events] == list(range(len(run.events)))
    assert [e.kind for e in run.events] == ["run_started", "step_completed", "run_finished"]
    assert run.summary.status == "interrupted"
    assert [s.step_id for s in run.steps] == ["s0"], "the result stored when Ctrl-C came is kept"


def test_an_interrupt_inside_is_raised_as_the_block_ends_and_one_after_it_at_once() -> None:
    finished = False
    with pytest.raises(KeyboardInterrupt), interrupts_held():
        with interrupts_held():  # nested, as a pair of runs' writes is
            os.kill(os.getpid(), signal.SIGINT)
        finished = True
    assert finished, "the block ran to its end before the interrupt"
    with pytest.raises(KeyboardInterrupt):
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(5)  # the interrupt lands here, at once
        pytest.fail("the interrupt after the block was held")


def test_a_second_interrupt_inside_goes_through_at_once() -> None:
    # A write riding out a database restart waits up to 30 s: a person pressing again is heard.
    reached = []
    with pytest.raises(KeyboardInterrupt), interrupts_held():
        os.kill(os.getpid(), signal.SIGINT)
        reached.append("held")
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(5)  # the second interrupt lands here, at once
        reached.append("waited")
    assert reached == ["held"]
    with interrupts_held():  # the one held was spent with the second: nothing left over
        pass


def test_off_the_main_thread_the_block_just_runs() -> None:
    # signal.signal raises ValueError off the main thread: holding must not try.
    seen: list[BaseException | None] = []

    def work() -> None:
        try:
            with interrupts_held():
                pass
            seen.append(None)
        except BaseException as e:
            seen.append(e)

    thread = threading.Thread(target=work)
    thread.start()
    thread.join()
    assert seen == [None]


class Swallowing:
    """A finalizer that raises what a Ctrl-C landing in it raises: Python swallows it ("Exception ignored")."""

    def __del__(self) -> None:
        raise KeyboardInterrupt


def wait_until_held(seconds: float = 30) -> None:
    """Wait, inside a held write, for an interrupt sent again to arrive (a thread sends it)."""
    holding = signal.getsignal(signal.SIGINT)
    deadline = time.monotonic() + seconds
    while getattr(holding, "arrived", None) is None:
        if time.monotonic() > deadline:
            pytest.fail("the swallowed interrupt was never sent again")
        time.sleep(0.01)


def test_a_swallowed_interrupt_is_sent_again_and_a_write_holds_it_as_a_first() -> None:
    # The write may be the first one after the press: the interrupt must wait for its end, as
    # a first Ctrl-C does, not go through as a person pressing twice would.
    finished = False
    with pytest.raises(KeyboardInterrupt), interrupts_held():
        Swallowing()
        wait_until_held()
        finished = True
    assert finished, "the write ran to its end before the interrupt"


def test_a_swallowed_interrupt_outside_a_write_stops_the_code_at_once(capfd: pytest.CaptureFixture[str]) -> None:
    with interrupts_held():  # a run has written: the hook is in place
        pass
    with pytest.raises(KeyboardInterrupt):
        Swallowing()
        time.sleep(30)  # the interrupt sent again lands here, at once
        pytest.fail("the swallowed interrupt was lost")
    assert "Exception ignored" not in capfd.readouterr().err


class PressedInAFinalizer:
    """A finalizer a person's Ctrl-C lands in: the handler runs inside it, and Python swallows what it raises."""

    def __del__(self) -> None:
        signal.raise_signal(signal.SIGINT)


def test_a_second_press_a_finalizer_swallowed_inside_a_write_goes_through_at_once(capfd: pytest.CaptureFixture[str]) -> None:
    # Two presses while a write waits (a database riding out a restart) mean "stop now": the
    # second one landing in a connection's cleanup must not come back held as a first one.
    reached = []
    with pytest.raises(KeyboardInterrupt), interrupts_held():
        os.kill(os.getpid(), signal.SIGINT)  # the first press: held
        reached.append("held")
        PressedInAFinalizer()  # the second press, in a finalizer
        time.sleep(5)  # sent again, it lands here, at once
        reached.append("waited")
    assert reached == ["held"], "the second press, swallowed and sent again, was held until the write ended"
    assert "Exception ignored" not in capfd.readouterr().err
    with interrupts_held():  # both presses were spent: nothing held over, nothing sent again later
        time.sleep(1)


@pytest.mark.parametrize("kind", sorted(WRITERS))
def test_two_presses_while_a_store_waits_stop_the_run_at_once_the_second_swallowed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:

    def pressed_twice() -> None:  # the first step's result goes out, and the store waits for its server
        os.kill(os.getpid(), signal.SIGINT)  # the first press: held
        PressedInAFinalizer()  # the second, in a connection's cleanup
        time.sleep(10)

    at_second_append(monkeypatch, kind, pressed_twice, stored_first=False)
    spec = spec_of(kind, tmp_path)
    started = time.monotonic()
    with pytest.raises(KeyboardInterrupt), durable_run("pressed", spec) as log:
        run_step(log, "s0", functools.partial(int, 0))
    took = time.monotonic() - started
    monkeypatch.undo()
    assert took < 5, f"two presses stopped the waiting write at once, not when it ended: {took:.1f} s"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        run = read_run("pressed", spec)
    assert [e.kind for e in run.events] == ["run_started", "run_finished"], "the result cut off is not claimed"
    assert run.summary.status == "interrupted"


def test_a_press_sent_again_that_goes_unheard_is_sent_once_more_and_no_more(monkeypatch: pytest.MonkeyPatch) -> None:
    # A signal that lands as the main thread lets go of the GIL to block is handled only when
    # the call returns, as one dropped here is never: the handler has not heard it, so it is
    # sent once more. Once heard, never again: that would be a second press.
    sent: list[int] = []
    sending = signal.pthread_kill

    def first_unheard(thread: int, number: int) -> None:
        sent.append(number)
        if len(sent) > 1:
            sending(thread, number)

    monkeypatch.setattr(signal, "pthread_kill", first_unheard)
    with interrupts_held():
        pass
    with pytest.raises(KeyboardInterrupt):
        Swallowing()
        time.sleep(30)
        pytest.fail("the press was lost")
    time.sleep(1)  # longer than the courier waits before sending again
    assert sent == [signal.SIGINT] * 2


def test_other_unraisables_go_to_the_hook_found_and_it_is_wrapped_once(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[type[BaseException] | None] = []
    monkeypatch.setattr(sys, "unraisablehook", lambda unraisable: seen.append(unraisable.exc_type))
    with interrupts_held(), interrupts_held():
        pass
    with interrupts_held():
        pass
    wrapping = sys.unraisablehook

    class Failing:
        def __del__(self) -> None:
            raise ValueError("closing failed")

    Failing()
    thread = threading.Thread(target=Swallowing)  # no signal handler runs there: not a person's press
    thread.start()
    thread.join()
    assert seen == [ValueError, KeyboardInterrupt], "the person's own hook still hears every other unraisable"
    assert sys.unraisablehook is wrapping and wrapping.passed_to.__name__ == "<lambda>", "wrapped once, not per write"  # type: ignore[attr-defined]


RESUMED_AS_A_PRESS_IS_SWALLOWED = """
import signal, time
from nb_durable import durable_run, run_step
from nb_durable.core.stores.jsonl import JsonlStore

signal.signal(signal.SIGINT, signal.default_int_handler)  # Ctrl-C raises KeyboardInterrupt, as in a terminal


class Cleanup:
    def __del__(self):
        signal.raise_signal(signal.SIGINT)  # a person's Ctrl-C lands while this finalizer runs


taking = JsonlStore.open_writer


def open_writer(self, run_id):
    Cleanup()  # the run opens its log: no line written yet
    time.sleep(60)  # waiting for the lease: the press stops the run here, at once
    return taking(self, run_id)


JsonlStore.open_writer = open_writer
with durable_run("pressed", "runs") as log:
    run_step(log, "s0", int)
print("ran on")
"""


def test_a_press_swallowed_before_the_first_write_stops_the_run_at_once_and_leaves_its_log_as_it_was(tmp_path: Path) -> None:
    # The hook that sends a swallowed press again used to come with the first write: a press
    # swallowed as the run opened its log or waited for its lease was lost, and the run went on.
    with pytest.raises(KeyboardInterrupt), durable_run("pressed", str(tmp_path / "runs")) as log:
        run_step(log, "s0", functools.partial(int, 7))
        raise KeyboardInterrupt
    recorded = (tmp_path / "runs" / "pressed.jsonl").read_bytes()

    started = time.monotonic()
    stopped = forkserver.run(
        [sys.executable, "-c", RESUMED_AS_A_PRESS_IS_SWALLOWED], cwd=tmp_path, env=subprocess_env(),
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    took = time.monotonic() - started
    assert stopped.returncode == -2, f"ended by its KeyboardInterrupt, as Python ends: {stopped.stdout}{stopped.stderr}"
    assert took < 30, f"the press stopped the 60 s wait for the lease at once: {took:.1f} s"
    assert "Exception ignored" not in stopped.stderr and "ran on" not in stopped.stdout, stopped.stdout + stopped.stderr
    assert (tmp_path / "runs" / "pressed.jsonl").read_bytes() == recorded, "nothing written, nothing lost"

    with durable_run("pressed", str(tmp_path / "runs")) as log:  # the lease is free: it resumes
        assert run_step(log, "s0", functools.partial(int, 8)) == 7, "the step recorded before is replayed"
    assert read_run("pressed", str(tmp_path / "runs")).summary.status == "completed"
