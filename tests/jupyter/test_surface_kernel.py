"""What a notebook shows of a run's state, and what its buttons do when pressed twice, in real
kernels: a run waiting for an answer says ``waiting`` everywhere (and an approval nobody could
be asked for, ``failed``), and a click that arrives twice (before the front end hears its
button is off) does what one click does.

Buttons are pressed with the comm messages a front end sends (``Kernel.click``), against the
loopback Messages API answering the real SDK in the kernel.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable
from pathlib import Path

from nb_durable.core.runs import read_run
from tests import forkserver
from tests.conftest import nb_durable_cli, subprocess_env
from tests.fakes import MessagesAPIServer, ScriptedScenario, reply, tool_use
from tests.jupyter.kernels import Kernel
from tests.jupyter.test_background_kernel import button, cell, status, store, until


def header_of(kernel: Kernel) -> str:
    """The newest timeline's header HTML, as the front end holds it."""
    timeline = kernel.widgets.with_class("nbd-timeline")[-1]
    return str(kernel.widgets.value(kernel.widgets.children(timeline)[0]))


def gated(server: MessagesAPIServer, kernels: Callable[[], Kernel]) -> Kernel:
    """A kernel whose background run ``gate`` asks for approval of a ``git push``."""
    server.scenario = ScriptedScenario([reply(tool_use("run_bash", {"command": "git push || echo pushed"})), reply("Pushed.")])
    kernel = kernels()
    assert kernel.run('%config AgentMagics.approve_bash = "git push"').status == "ok"
    assert kernel.run(cell("gate")).status == "ok"
    return kernel


def test_a_run_waiting_for_approval_says_waiting_in_the_badge_the_row_the_runs_and_the_handle(
    tmp_path: Path, server: MessagesAPIServer, kernels: Callable[[], Kernel]
) -> None:
    kernel = gated(server, kernels)
    approve = button(kernel, "nbd-approve")
    kernel.pump(lambda: "nbd-status-waiting" in header_of(kernel), what="the header's badge saying waiting")
    assert ">waiting<" in header_of(kernel) and ">running<" not in header_of(kernel)
    rows = [str(kernel.widgets.value(m)) for m in kernel.widgets.models if "data-kind=\"approval\"" in str(kernel.widgets.value(m) or "")]
    assert rows and 'nbd-step nbd-waiting' in rows[-1] and ">in flight<" not in rows[-1]
    listed = kernel.run("%agent_runs").text()
    assert "waiting (background, here)" in listed, listed
    assert kernel.run("print(h.status)").text() == "waiting\n"
    elsewhere = nb_durable_cli("runs", "--store", store(tmp_path)).stdout  # another process reads the lease's mark
    assert re.search(r"^gate\s+waiting\s", elsewhere, re.M) and "for approval of step approval:0:0:" in elsewhere, elsewhere
    kernel.click(approve)
    until(lambda: status(tmp_path, "gate") == "completed", what="the approved run completing")
    assert kernel.run("%agent_wait gate\nprint(h.status)").text().rstrip().endswith("completed")
    assert read_run("gate", store(tmp_path)).summary.status == "completed"


def test_a_kernel_killed_while_its_run_waits_for_approval_leaves_it_interrupted_never_waiting(
    tmp_path: Path, server: MessagesAPIServer, kernels: Callable[[], Kernel]
) -> None:
    kernel = gated(server, kernels)
    button(kernel, "nbd-approve")
    assert status(tmp_path, "gate") == "waiting"
    kernel.kill()
    listed = nb_durable_cli("runs", "--store", store(tmp_path)).stdout
    assert re.search(r"^gate\s+(interrupted|in_doubt)\s", listed, re.M) and "waiting" not in listed, listed


def test_resume_clicked_while_the_run_waits_for_approval_refuses_and_leaves_its_question_buttons(
    tmp_path: Path, server: MessagesAPIServer, kernels: Callable[[], Kernel]
) -> None:
    server.scenario = ScriptedScenario([reply(tool_use("run_bash", {"command": "git push || echo pushed"})), reply("Pushed.")])
    kernel = kernels()
    assert kernel.run('%config AgentMagics.approve_bash = "git push"').status == "ok"
    assert kernel.run(cell("asks")).status == "ok"
    approve = button(kernel, "nbd-approve")
    resume = button(kernel, "nbd-resume", enabled=False)
    # The front end shows Resume off; a click sent before it heard so (or twice) still reaches the kernel.
    kernel.click(resume)
    kernel.click(resume)
    note = kernel.widgets.with_class("nbd-bar-note")[0]
    said = kernel.pump(lambda: str(kernel.widgets.value(note) or ""), what="the Resume answering")
    assert approve in kernel.widgets.models and not kernel.widgets.models[approve].get("disabled"), "its question buttons stay"
    assert "run asks is waiting here already: nothing to resume" in said
    kernel.click(approve)
    until(lambda: status(tmp_path, "asks") == "completed", what="the approved run completing")
    assert [d.decision for s in read_run("asks", store(tmp_path)).steps for d in s.decisions] == ["approved"]
    assert len(server.requests_to("messages")) == 2


def test_a_double_click_on_resume_after_a_stop_starts_one_session_and_keeps_its_rows(
    tmp_path: Path, server: MessagesAPIServer, kernels: Callable[[], Kernel]
) -> None:
    server.scenario = ScriptedScenario(
        [reply(tool_use("run_bash", {"command": "echo one >> ledger.txt; sleep 60"})), reply("Counted once.")]
    )
    kernel = kernels()
    assert kernel.run(cell("twice")).status == "ok"
    until((tmp_path / "ledger.txt").exists, what="the command starting")
    kernel.click(button(kernel, "nbd-stop"))
    until(
        lambda: (s := read_run("twice", store(tmp_path)).summary).status == "in_doubt" and s.holder is None,
        timeout=20, what="the run stopping in doubt and releasing its lease",
    )  # fmt: skip
    stopped = set(kernel.widgets.with_class("nbd-skip"))
    resume = button(kernel, "nbd-resume")
    kernel.click(resume)
    kernel.click(resume)  # before the front end hears the first click turned it off
    skip = button(kernel, "nbd-skip", what="the resumed session's Skip button", other_than=stopped)
    note = kernel.widgets.with_class("nbd-bar-note")[0]
    said = kernel.pump(lambda: str(kernel.widgets.value(note) or ""), what="the second click answering")
    assert skip in kernel.widgets.models, "the second click closed nothing of the session going on"
    assert "here already: nothing to resume" in said
    kernel.click(skip)
    until(lambda: status(tmp_path, "twice") == "completed", what="the resumed run completing", seen=kernel.threads)
    assert (tmp_path / "ledger.txt").read_text() == "one\n"
    assert [d.decision for s in read_run("twice", store(tmp_path)).steps for d in s.decisions] == ["skip"]


def test_a_double_click_on_fork_from_here_makes_one_fork_and_reports_it(
    tmp_path: Path, server: MessagesAPIServer, kernels: Callable[[], Kernel]
) -> None:
    (tmp_path / "notes.txt").write_text("buy milk\n")
    server.scenario = ScriptedScenario([reply(tool_use("run_bash", {"command": "echo effect >> ledger.txt"})), reply("Done.")])
    kernel = kernels()
    assert kernel.run(cell("base")).status == "ok"
    # Not %agent_wait: it replaces the widget, buttons and all, by the static timeline.
    until(lambda: status(tmp_path, "base") == "completed", what="the run completing")
    assert (tmp_path / "ledger.txt").read_text() == "effect\n"
    fork_at = kernel.pump(lambda: kernel.widgets.with_class("nbd-fork-at"), what="the fork box")[-1]
    kernel.pump(lambda: kernel.widgets.value(fork_at) == 3, what="the fork box reaching 3 steps")
    kernel.type_into(fork_at, 1)
    kernel.pump(lambda: kernel.widgets.value(fork_at) == 1, what="the kernel echoing the fork box's 1")
    fork = button(kernel, "nbd-fork")
    kernel.click(fork)
    kernel.click(fork)  # the second message leaves before the front end hears anything of the first
    until(lambda: status(tmp_path, "base-fork1") == "completed", what="the fork completing")
    assert sorted(p.name for p in Path(store(tmp_path)).glob("*.jsonl")) == ["base-fork1.jsonl", "base.jsonl"]
    note = kernel.widgets.with_class("nbd-bar-note")[0]
    kernel.pump(lambda: "forked into base-fork1 already" in str(kernel.widgets.value(note)), what="the second click reporting the fork")
    assert (tmp_path / "ledger.txt").read_text() == "effect\neffect\n", "the fork ran the effect once, not twice"
    timeline = kernel.widgets.with_class("nbd-timeline")[0]
    forks_box = kernel.widgets.with_class("nbd-forks", within=timeline)[0]
    assert len(kernel.widgets.children(forks_box)) == 1, "one fork's timeline below"


def test_the_reason_typed_with_an_answer_shows_in_the_row_the_show_commands_and_the_export(
    tmp_path: Path, server: MessagesAPIServer, kernels: Callable[[], Kernel]
) -> None:
    server.scenario = ScriptedScenario(
        [reply(tool_use("run_bash", {"command": "git push --force || echo forced"})), reply("Not pushed.")]
    )
    kernel = kernels()
    assert kernel.run('%config AgentMagics.approve_bash = "git push"').status == "ok"
    assert kernel.run(cell("why")).status == "ok"
    deny = button(kernel, "nbd-deny")
    question = kernel.pump(lambda: kernel.widgets.with_class("nbd-question"), what="the question's box")[-1]
    reason = kernel.pump(lambda: kernel.widgets.with_class("nbd-reason", within=question), what="its reason box")[0]
    kernel.type_into(reason, "no force pushes on main")
    kernel.pump(lambda: kernel.widgets.value(reason) == "no force pushes on main", what="the kernel echoing the reason")
    kernel.click(deny)
    until(lambda: status(tmp_path, "why") == "completed", what="the run completing after the denial")
    said = ": no force pushes on main"

    def approval_row() -> str:
        rows = [str(kernel.widgets.value(m) or "") for m in kernel.widgets.models]
        return next((r for r in rows if 'data-kind="approval"' in r and "nbd-live" in r), "")

    row = kernel.pump(approval_row, what="the approval's row, answered")
    summary = row.split("</summary>")[0]
    assert "denied by " in summary and said in summary, "the reason in the row's one line"
    assert said in row.split("</summary>")[1], "and in its expanded detail"
    assert said in kernel.run("%agent_wait why\n%agent_show why").text()
    shown = forkserver.run(
        [sys.executable, "-m", "nb_durable.cli", "show", "why", "--store", store(tmp_path)],
        env=subprocess_env(), capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert re.search(r"approval for run_.*denied by .+: no force pushes on main$", shown.stdout, re.M), shown.stdout
    exported = tmp_path / "why.ipynb"
    forkserver.run(
        [sys.executable, "-m", "nb_durable.cli", "export", "why", "--store", store(tmp_path), "-o", str(exported)],
        env=subprocess_env(), capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    assert said in exported.read_text()


def test_the_header_counts_every_row_and_says_whose_tokens_were_paid(
    tmp_path: Path, server: MessagesAPIServer, kernels: Callable[[], Kernel]
) -> None:
    server.scenario = ScriptedScenario(
        [reply(tool_use("run_bash", {"command": "echo one >> ledger.txt; sleep 60"})), reply("Counted once.")]
    )
    kernel = kernels()
    assert kernel.run(cell("counted")).status == "ok"
    until((tmp_path / "ledger.txt").exists, what="the command starting")
    kernel.click(button(kernel, "nbd-stop"))
    # The stopped session: a live model turn and the command cut off, in doubt: two rows, two steps.
    kernel.pump(lambda: "2 steps (0 replayed, 1 live, 1 in doubt)" in header_of(kernel), what="the stopped header")
    stopped = set(kernel.widgets.with_class("nbd-skip"))
    kernel.click(button(kernel, "nbd-resume"))
    kernel.click(button(kernel, "nbd-skip", other_than=stopped))
    until(lambda: status(tmp_path, "counted") == "completed", what="the resumed run completing")
    kernel.pump(lambda: "3 steps (1 replayed, 1 live, 1 skipped)" in header_of(kernel), what="the resumed header")
    assert "this session: paid" in re.sub(r"<[^>]+>", "", header_of(kernel))
    shown = kernel.run("%agent_show counted").text()
    assert "3 steps recorded · all sessions: paid " in shown.splitlines()[0], shown
    cli = forkserver.run(
        [sys.executable, "-m", "nb_durable.cli", "show", "counted", "--store", store(tmp_path)],
        env=subprocess_env(), capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert "completed, 3 steps" in cli.stdout and "· all sessions: paid " in cli.stdout, cli.stdout


def told_of_the_cut_off_call(server: MessagesAPIServer) -> str:
    """The tool result the model was sent for the call the stop cut off."""
    [result] = server.requests_to("messages")[-1].body["messages"][-1]["content"]
    return str(result["content"])


def test_a_call_cut_off_by_the_stop_button_is_told_to_the_model_as_stopped_not_died(
    tmp_path: Path, server: MessagesAPIServer, kernels: Callable[[], Kernel]
) -> None:
    server.scenario = ScriptedScenario(
        [reply(tool_use("run_bash", {"command": "echo one >> ledger.txt; sleep 60"})), reply("Counted once.")]
    )
    kernel = kernels()
    assert kernel.run(cell("told")).status == "ok"
    until((tmp_path / "ledger.txt").exists, what="the command starting")
    kernel.click(button(kernel, "nbd-stop"))
    until(lambda: (s := read_run("told", store(tmp_path)).summary).status == "in_doubt" and s.holder is None, timeout=20)
    stopped = set(kernel.widgets.with_class("nbd-skip"))
    kernel.click(button(kernel, "nbd-resume"))
    skip = button(kernel, "nbd-skip", other_than=stopped)
    kernel.click(skip)

    def seen() -> str:  # it timed out once in six parallel runs: which part missed?
        summary = read_run("told", store(tmp_path)).summary
        models = kernel.widgets.models
        skips = {m: models[m].get("disabled") for m in kernel.widgets.with_class("nbd-skip")}
        notes = [models[m].get("value") for m in kernel.widgets.with_class("nbd-bar-note")]
        return (
            f"run {summary.status}, asking {summary.asking}; clicked {skip}, skip buttons (disabled?) {skips}, "
            f"before {stopped}; notes {notes}; the kernel's threads:\n{kernel.threads()}"
        )

    # Completed and let go: a run's end is recorded before its background thread frees the lease,
    # and a cell run in between is refused as another writer's (RunLockedError).
    until(lambda: (s := read_run("told", store(tmp_path)).summary).status == "completed" and s.holder is None,
          what="the resumed run completing", seen=seen)  # fmt: skip
    told = told_of_the_cut_off_call(server)
    assert re.fullmatch(
        r"This run_bash call was cut off because the run was stopped by \S+ with the Stop button, before its result "
        r"was recorded, so whether it took effect is unknown\. Check the workspace before doing it again\.",
        told,
    ), told
    assert "died" not in told
    # Replay sends the same words: the same cell again asks the model nothing.
    asked = len(server.requests_to("messages"))
    again = kernel.run("%%agent --run told --model claude-test-1 --workspace . --in-doubt ask\nDo the work.")
    assert again.status == "ok" and "Counted once." in again.text(), again.text()
    assert len(server.requests_to("messages")) == asked


def test_an_approval_nobody_can_be_asked_for_ends_failed_in_the_widget_its_text_and_its_page(
    tmp_path: Path, server: MessagesAPIServer, kernels: Callable[[], Kernel]
) -> None:
    # The kernel has no stdin (allow_stdin=False, as nbclient runs it): the run fails, and so does its approval.
    server.scenario = ScriptedScenario([reply(tool_use("run_bash", {"command": "git push || echo pushed"})), reply("Pushed.")])
    kernel = kernels()
    assert kernel.run('%config AgentMagics.approve_bash = "git push"').status == "ok"
    done = kernel.run("%%agent --run nobody --model claude-test-1 --workspace .\nDo the work.")
    assert done.status == "error" and kernel.last_error[0] == "DecisionNeededError"
    # The widget was replaced by its static form (below) and closed: no row of it stays open.
    assert not [m for m in kernel.widgets.models if 'data-kind="approval"' in str(kernel.widgets.value(m) or "")]
    page = re.findall(r'<div class="nbd-step [^"]*" data-kind="approval"', done.html())
    assert page == ['<div class="nbd-step nbd-failed" data-kind="approval"'], page
    texts = [o["content"]["data"]["text/plain"] for o in done.outputs if "text/plain" in o["content"].get("data", {})]
    assert re.search(r"^  failed +approval for run_bash", texts[-1], re.M) and "waiting" not in texts[-1], texts[-1]
    assert read_run("nobody", store(tmp_path)).summary.status == "failed"
