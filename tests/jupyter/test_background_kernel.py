"""Background runs in real kernels: the cell returns before the run's first model call does,
other cells run meanwhile, and the timeline's buttons are pressed with exactly the comm
messages a front end sends (Stop, Approve, Deny, Rerun, Skip, Resume, Fork), each recorded.

The loopback Messages API answers the real SDK in the kernel; ``Kernel.widgets`` mirrors the
kernel's widget models from iopub as a front end would, so a test finds a button by its CSS
class, under the timeline row that asks, and clicks it.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from pathlib import Path
from typing import Any

from nb_durable.core.runs import read_run
from tests.fakes import MessagesAPIServer, ScriptedScenario, reply, tool_use
from tests.fakes.messages_api.scenario import Delay
from tests.jupyter.kernels import Kernel
from tests.waiting import wait_until

AGENT = "%%agent --background --run {run} --model claude-test-1 --workspace . --in-doubt ask -o {var}\n{task}"


def cell(run: str, task: str = "Do the work.", var: str = "h") -> str:
    return AGENT.format(run=run, var=var, task=task)


def store(tmp_path: Path) -> str:
    return str(tmp_path / "runs")


def decisions(tmp_path: Path, run_id: str) -> list[tuple[str, str, str, str]]:
    return [(s.step_id, d.decision, d.by, d.note) for s in read_run(run_id, store(tmp_path)).steps for d in s.decisions]


def status(tmp_path: Path, run_id: str) -> str:
    try:
        return read_run(run_id, store(tmp_path)).summary.status
    except LookupError:
        return "none"


def completed_steps(tmp_path: Path, run_id: str) -> int:
    try:
        return sum(1 for s in read_run(run_id, store(tmp_path)).steps if s.completed_at is not None)
    except LookupError:  # not created yet, or created with nothing in it yet
        return 0


def until(check: Callable[[], Any], timeout: float = 60, what: str = "the condition", seen: Callable[[], object] | None = None) -> Any:
    return wait_until(check, what, timeout, every=0.05, seen=seen)


def stuck(kernel: Kernel, tmp_path: Path, run_id: str, clicked: str, before: Collection[str]) -> Callable[[], str]:
    """What a resumed run that does not go on after a decision's click waits on: its record, the
    decision buttons the front end holds, and the kernel's threads (a resume settled by a button
    timed out about once in five loaded runs of this file, the API asked once)."""

    def seen() -> str:
        summary = read_run(run_id, store(tmp_path)).summary
        models = kernel.widgets.models
        buttons = {
            m: (models[m].get("description"), models[m].get("disabled"))
            for m in kernel.widgets.with_class("nbd-button")
            if m in before or m == clicked or {"nbd-skip", "nbd-rerun", "nbd-fail"} & set(models[m].get("_dom_classes") or ())
        }
        return (
            f"run {summary.status}, asking {summary.asking}, holder {summary.holder}; decisions "
            f"{decisions(tmp_path, run_id)}; clicked {clicked}; stopped session's {sorted(before)}; decision "
            f"buttons (label, disabled) {buttons}; the kernel's threads:\n{kernel.threads()}"
        )

    return seen


def resume_and_settle(kernel: Kernel, tmp_path: Path, run_id: str, choice: str) -> None:
    """Click Resume on a run stopped in doubt, then the resumed session's ``choice`` button, and
    wait for the run to complete."""
    stopped = set(kernel.widgets.with_class(f"nbd-{choice}"))
    kernel.click(button(kernel, "nbd-resume"))
    # The resumed session draws its own row for the step in doubt: its button, not the stopped one's.
    clicked = button(kernel, f"nbd-{choice}", what=f"the resumed session's {choice} button", other_than=stopped)
    kernel.click(clicked)
    until(
        lambda: status(tmp_path, run_id) == "completed", what=f"the resumed run completing after {choice}",
        seen=stuck(kernel, tmp_path, run_id, clicked, stopped),
    )  # fmt: skip


def button(kernel: Kernel, css_class: str, *, enabled: bool = True, what: str = "", other_than: Collection[str] = ()) -> str:
    """The newest button with ``css_class`` (enabled, unless asked otherwise), not one of
    ``other_than`` (those an earlier session drew), waited for."""

    def find() -> str | None:
        found = [
            m for m in kernel.widgets.with_class(css_class)
            if kernel.widgets.models[m].get("disabled") is not enabled and m not in other_than
        ]  # fmt: skip
        return found[-1] if found else None

    return str(kernel.pump(find, what=what or f"an {'enabled' if enabled else 'disabled'} {css_class} button"))


def test_a_background_cell_returns_before_its_first_model_call_and_other_cells_run_meanwhile(
    tmp_path: Path, server: MessagesAPIServer, kernels: Callable[[], Kernel]
) -> None:
    (tmp_path / "notes.txt").write_text("buy milk\n")
    server.scenario = ScriptedScenario(
        [Delay(3.0, reply(tool_use("read_file", {"path": "notes.txt"}))), Delay(1.0, reply("The note says buy milk."))]
    )
    kernel = kernels()
    started = kernel.run(cell("bg1"), timeout=30)
    assert started.status == "ok", started.text()
    # execute_reply came first: no step has completed yet (the first model call may have begun).
    assert completed_steps(tmp_path, "bg1") == 0
    until(lambda: server.requests_at(0), what="the run's first request")
    other = kernel.run("print('meanwhile', 6 * 7)")
    assert other.text() == "meanwhile 42\n"  # nothing of the run printed into this cell
    assert status(tmp_path, "bg1") not in ("completed",)
    waited = kernel.run("%agent_wait bg1 -o r\nprint(r.status, h.status, r.text)", timeout=60)
    assert waited.status == "ok", waited.text()
    assert "completed completed The note says buy milk." in waited.text()
    assert [len(r.body["messages"]) for r in server.requests_to("messages")] == [1, 3]


def test_two_background_runs_go_on_at_once_in_one_kernel(
    tmp_path: Path, server: MessagesAPIServer, kernels: Callable[[], Kernel]
) -> None:
    server.scenario = ScriptedScenario([reply(tool_use("run_bash", {"command": "sleep 2; echo ok"})), reply("Done.")])
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    kernel = kernels()
    for run, folder in (("one", "a"), ("two", "b")):
        started = kernel.run(f"%%agent --background --run {run} --model claude-test-1 --workspace {folder}\nSleep.")
        assert started.status == "ok", started.text()

    def both_held() -> bool:
        try:
            return all(read_run(r, store(tmp_path)).summary.holder for r in ("one", "two"))
        except LookupError:
            return False

    until(both_held, what="both runs holding their leases at once")
    listed = kernel.run("%agent_runs").text()
    assert sum("running (background, here)" in line for line in listed.splitlines()) == 2, listed
    # A later cell on a run going on here, in the background or not, is refused: in one process
    # a newer writer supersedes the older, so it would take the run from under its thread.
    for again in ("%%agent --background --run one --model claude-test-1 --workspace a\nSleep.",
                  "%%agent --run one --model claude-test-1 --workspace a\nSleep.", "%agent_resume one"):  # fmt: skip
        refused = kernel.run(again)
        assert refused.status == "error" and "already goes on in the background in this kernel" in refused.text(), again
    waited = kernel.run("%agent_wait", timeout=60)
    assert waited.status == "ok", waited.text()
    assert status(tmp_path, "one") == status(tmp_path, "two") == "completed"
    assert len(server.requests) == 4, "each run asked the model twice: nothing was taken over and asked again"


def test_approve_and_deny_buttons_answer_a_gated_command_and_the_log_records_who_and_why(
    tmp_path: Path, server: MessagesAPIServer, kernels: Callable[[], Kernel]
) -> None:
    server.scenario = ScriptedScenario(
        [
            reply(tool_use("run_bash", {"command": "git push origin main || echo pushed > pushed.txt"})),
            reply(tool_use("run_bash", {"command": "git push --force || echo forced > forced.txt"})),
            reply("Pushed once; the force push was denied."),
        ]
    )
    kernel = kernels()
    assert kernel.run('%config AgentMagics.approve_bash = "git push"').status == "ok"
    assert kernel.run(cell("gate")).status == "ok"
    approve = button(kernel, "nbd-approve")
    question = kernel.pump(lambda: kernel.widgets.with_class("nbd-question"), what="the question's box")[-1]
    reason = kernel.pump(lambda: kernel.widgets.with_class("nbd-reason", within=question), what="its reason box")[0]
    kernel.type_into(reason, "pushing main is fine")
    kernel.pump(lambda: kernel.widgets.value(reason) == "pushing main is fine", what="the kernel echoing the typed reason")
    kernel.click(approve)
    until((tmp_path / "pushed.txt").exists, what="the approved command running")
    first = set(kernel.widgets.descendants(question))
    deny = kernel.pump(
        lambda: [
            m for m in kernel.widgets.with_class("nbd-deny") if m not in first and not kernel.widgets.models[m].get("disabled")
        ],
        what="a second question",
    )[-1]
    kernel.click(deny)
    assert kernel.run("%agent_wait gate", timeout=60).status == "ok"
    assert not (tmp_path / "forced.txt").exists()
    made = [d[1:] for d in decisions(tmp_path, "gate")]
    who = made[0][1]
    assert made == [("approved", who, "pushing main is fine"), ("denied", who, "")]
    assert who.endswith(" (button)")
    # Replay never asks again: the same cell in the foreground replays both answers.
    replayed = kernel.run("%%agent --run gate --model claude-test-1 --workspace . --in-doubt ask\nDo the work.")
    assert replayed.status == "ok" and "Pushed once" in replayed.text()
    assert len(server.requests_to("messages")) == 3


def test_stop_kills_the_command_then_resume_and_skip_settle_it_by_button(
    tmp_path: Path, server: MessagesAPIServer, kernels: Callable[[], Kernel]
) -> None:
    server.scenario = ScriptedScenario(
        [reply(tool_use("run_bash", {"command": "echo one >> ledger.txt; sleep 60"})), reply("Counted once.")]
    )
    kernel = kernels()
    assert kernel.run(cell("stopme")).status == "ok"
    until((tmp_path / "ledger.txt").exists, what="the command starting")
    kernel.click(button(kernel, "nbd-stop"))
    # Stopped means recorded in doubt and the lease released (the release comes just after the record).
    stopped = until(
        lambda: (s := read_run("stopme", store(tmp_path)).summary).status == "in_doubt" and s.holder is None and s,
        timeout=20, what="the run stopping in doubt and releasing its lease",
    )  # fmt: skip
    assert (stopped.error or "").endswith(" with the Stop button"), stopped.error
    resume_and_settle(kernel, tmp_path, "stopme", "skip")
    assert (tmp_path / "ledger.txt").read_text() == "one\n"  # skipped: never run twice
    assert [d[1] for d in decisions(tmp_path, "stopme")] == ["skip"]
    assert read_run("stopme", store(tmp_path)).summary.error is None


def test_rerun_button_runs_a_step_in_doubt_again(
    tmp_path: Path, server: MessagesAPIServer, kernels: Callable[[], Kernel]
) -> None:
    server.scenario = ScriptedScenario(
        [reply(tool_use("run_bash", {"command": "echo go >> ledger.txt; test -e second || { touch second; sleep 60; }"})), reply("Ran it.")]
    )
    kernel = kernels()
    assert kernel.run(cell("again")).status == "ok"
    until((tmp_path / "second").exists, what="the command starting")
    assert kernel.run("%agent_stop again").status == "ok"
    until(
        lambda: (s := read_run("again", store(tmp_path)).summary).status == "in_doubt" and s.holder is None,
        timeout=20, what="the run stopping in doubt and releasing its lease",
    )  # fmt: skip
    resume_and_settle(kernel, tmp_path, "again", "rerun")
    assert (tmp_path / "ledger.txt").read_text() == "go\ngo\n"
    assert [d[1] for d in decisions(tmp_path, "again")] == ["rerun"]


def test_fork_from_here_starts_a_new_run_from_the_first_steps_below(
    tmp_path: Path, server: MessagesAPIServer, kernels: Callable[[], Kernel]
) -> None:
    (tmp_path / "notes.txt").write_text("buy milk\n")
    server.scenario = ScriptedScenario([reply(tool_use("read_file", {"path": "notes.txt"})), reply("Milk.")])
    kernel = kernels()
    assert kernel.run(cell("base")).status == "ok"
    # Not %agent_wait: it replaces the widget, buttons and all, by the static timeline.
    until(lambda: status(tmp_path, "base") == "completed", what="the run completing")
    fork_at = kernel.pump(lambda: kernel.widgets.with_class("nbd-fork-at"), what="the fork box")[-1]
    kernel.pump(lambda: kernel.widgets.value(fork_at) == 3, what="the fork box reaching 3 steps")
    kernel.type_into(fork_at, 2)
    kernel.pump(lambda: kernel.widgets.value(fork_at) == 2, what="the kernel echoing the fork box's 2")
    before = len(server.requests_to("messages"))
    kernel.click(button(kernel, "nbd-fork"))
    until(lambda: status(tmp_path, "base-fork2") == "completed", what="the fork completing")
    forked = read_run("base-fork2", store(tmp_path))
    assert [s.step_id for s in forked.steps][:2] == [s.step_id for s in read_run("base", store(tmp_path)).steps][:2]
    assert len(server.requests_to("messages")) == before + 1  # only the last model turn was asked again
    timeline = kernel.widgets.with_class("nbd-timeline")[0]
    forks_box = kernel.widgets.with_class("nbd-forks", within=timeline)[0]
    child = kernel.pump(lambda: kernel.widgets.children(forks_box), what="the fork's timeline shown below")[0]
    assert "nbd-timeline" in kernel.widgets.models[child]["_dom_classes"]


def test_a_kernel_killed_during_a_background_run_resumes_in_a_new_kernel_without_repeating(
    tmp_path: Path, server: MessagesAPIServer, kernels: Callable[[], Kernel]
) -> None:
    server.scenario = ScriptedScenario(
        [reply(tool_use("run_bash", {"command": "echo once >> ledger.txt"})), Delay(30.0, reply("Logged."))]
    )
    first = kernels()
    assert first.run(cell("killed")).status == "ok"
    until(lambda: server.requests_at(1), what="the second model call going out")
    shown = first.pump(lambda: first.widgets.display_ids, what="the timeline's display id")[0]
    first.kill()
    second = kernels()
    listed = second.run("%agent_runs")
    row = next(line for line in listed.text().splitlines() if "killed" in line)
    assert "running" not in row, row
    server.scenario = ScriptedScenario([reply(tool_use("run_bash", {"command": "echo once >> ledger.txt"})), reply("Logged.")])
    resumed = second.run("%agent_resume killed --background\n%agent_wait killed", timeout=60)
    assert resumed.status == "ok", resumed.text()
    assert (tmp_path / "ledger.txt").read_text() == "once\n"
    turns = [len(r.body["messages"]) for r in server.requests_to("messages")]
    assert turns.count(1) == 1, turns  # the completed first turn was never asked again
    # The new display has an id of its own: the dead kernel's cell keeps what it showed (issue 21.1).
    assert second.widgets.display_ids[0] != shown and shown.startswith("nb-durable-run-killed-")


def test_kernel_shutdown_stops_a_background_run_recorded_and_released(
    tmp_path: Path, server: MessagesAPIServer, kernels: Callable[[], Kernel]
) -> None:
    server.scenario = ScriptedScenario([reply(tool_use("run_bash", {"command": "touch began; sleep 60"})), reply("x")])
    kernel = kernels()
    assert kernel.run(cell("shut")).status == "ok"
    until((tmp_path / "began").exists, what="the command starting")
    kernel.client.stop_channels()
    kernel.manager.shutdown_kernel(now=False)
    summary = read_run("shut", store(tmp_path)).summary
    assert summary.holder is None
    assert summary.status == "in_doubt" and "its kernel is shutting down" in (summary.error or "")
    assert len(server.requests_to("messages")) == 1  # the run went no further than the cut-off command


def test_a_failing_background_run_shows_its_error_in_its_timeline_and_the_wait_fails(
    tmp_path: Path, server: MessagesAPIServer, kernels: Callable[[], Kernel]
) -> None:
    from tests.fakes.messages_api.scenario import Error

    server.scenario = ScriptedScenario([Error(400, "invalid_request_error", "the request is malformed")])
    kernel = kernels()
    assert kernel.run(cell("broken")).status == "ok"
    waited = kernel.run("%agent_wait broken")
    assert waited.status == "error" and "the request is malformed" in waited.text()
    assert "Traceback" not in waited.text()
    assert status(tmp_path, "broken") == "failed"
    # The wait replaced the widget by the timeline as recorded, and closed the widget.
    assert "nbd-status-failed" in waited.html() and "the request is malformed" in waited.html()
    assert not [m for m in kernel.widgets.models.values() if "nbd-header" in str(m.get("value", ""))]
    stopped = kernel.run("%agent_stop broken")
    assert stopped.status == "error" and "UsageError" in stopped.text()


def test_the_interrupt_button_does_not_kill_a_background_runs_command(
    tmp_path: Path, server: MessagesAPIServer, kernels: Callable[[], Kernel]
) -> None:
    # ipykernel forwards an interrupt to every child in its process group (the command's
    # supervisor among them): a background run's command must survive it and finish.
    server.scenario = ScriptedScenario([reply(tool_use("run_bash", {"command": "touch began; sleep 2; echo done > ended"})), reply("Ended.")])
    kernel = kernels()
    assert kernel.run(cell("survive")).status == "ok"
    until((tmp_path / "began").exists, what="the command starting")
    kernel.manager.interrupt_kernel()
    assert kernel.run("%agent_wait survive", timeout=60).status == "ok"
    assert (tmp_path / "ended").read_text() == "done\n"
    step = read_run("survive", store(tmp_path)).steps[1]
    assert "exit status 0" in step.result["content"]
