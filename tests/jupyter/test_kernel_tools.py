"""Kernel tools through a real kernel: the agent lists and inspects the notebook's variables
and, with the person's approval (answered on the kernel's stdin), runs Python in its namespace.
After a kernel restart the replayed run_python does not re-create its variable: the row and
``%agent_resume`` say so, and ``--rerun-python`` executes the recorded code again."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from nb_durable.core.events import Decision
from nb_durable.core.runs import read_run
from tests.fakes import MessagesAPIServer, ScriptedScenario, reply, tool_use
from tests.jupyter.kernels import Kernel

CELL = "%%agent --run kt --model claude-test-1 --workspace . --kernel-tools\nAdd up the prices."


def scenario() -> ScriptedScenario:
    return ScriptedScenario(
        [
            reply(tool_use("list_variables", {}, id="toolu_list")),
            reply(tool_use("inspect_variable", {"name": "prices"}, id="toolu_look")),
            reply(tool_use("run_python", {"code": "total = sum(prices)\nprint('total', total)"}, id="toolu_run")),
            reply("The prices add up to 6."),
        ]
    )


def interactive(kernel: Kernel, code: str, answer: str) -> tuple[str, list[str]]:
    """Run a cell whose input() prompts get ``answer``; (what it printed, the prompts)."""
    printed: list[str] = []
    prompts: list[str] = []

    def on_output(msg: dict[str, Any]) -> None:
        content = msg["content"]
        if msg["msg_type"] == "stream":
            printed.append(content["text"])
        elif msg["msg_type"] in ("display_data", "update_display_data", "execute_result"):
            printed.append(content["data"].get("text/plain", ""))

    def on_stdin(msg: dict[str, Any]) -> None:
        prompts.append(msg["content"]["prompt"])
        kernel.client.input(answer)

    reply_msg = kernel.client.execute_interactive(
        code, timeout=120, allow_stdin=True, output_hook=on_output, stdin_hook=on_stdin
    )
    assert reply_msg["content"]["status"] == "ok", reply_msg["content"]
    return "".join(printed), prompts


@pytest.fixture
def kernels(tmp_path: Path) -> Iterator[tuple[Any, MessagesAPIServer]]:
    started: list[Kernel] = []
    with MessagesAPIServer(scenario()) as server:

        def start() -> Kernel:
            kernel = Kernel(tmp_path, ANTHROPIC_BASE_URL=server.url, ANTHROPIC_API_KEY="test-key")
            started.append(kernel)
            assert kernel.run("%load_ext nb_durable").status == "ok"
            return kernel

        yield start, server
        for kernel in started:
            with contextlib.suppress(Exception):
                kernel.close()


def test_kernel_tools_list_inspect_and_run_with_approval_then_warn_after_a_restart(
    tmp_path: Path, kernels: tuple[Any, MessagesAPIServer]
) -> None:
    start, server = kernels
    first = start()
    assert first.run("prices = [1, 2, 3]\nimport math").status == "ok"
    printed, prompts = interactive(first, CELL, "y")
    assert len(prompts) == 1 and "run_python" in prompts[0] and "changes the notebook's variables" in prompts[0]
    sent = {
        b["tool_use_id"]: b
        for r in server.requests
        for m in r.body["messages"]
        if m["role"] == "user" and isinstance(m["content"], list)
        for b in m["content"]
    }
    assert "prices\tlist\tlen 3" in sent["toolu_list"]["content"] and "math" not in sent["toolu_list"]["content"]
    assert "type: builtins.list" in sent["toolu_look"]["content"] and "repr: [1, 2, 3]" in sent["toolu_look"]["content"]
    assert sent["toolu_run"]["content"] == "total 6" and not sent["toolu_run"].get("is_error")
    assert "run_python · kernel · external" in printed
    assert "total 6" not in printed.replace("→ total 6", "")  # the code's output went to the agent, not the cell
    assert first.run("print(total)").text().strip() == "6"
    run = read_run("kt", str(tmp_path / "runs"))
    assert [d.decision for d in run.events if isinstance(d, Decision)] == ["approved"]
    first.kill()

    second = start()
    resumed = second.run("%agent_resume kt")
    assert resumed.status == "ok", resumed.text()
    text = resumed.text()
    assert "this run called run_python 1 time(s)" in text and "--rerun-python" in text
    assert "replayed, not re-run: after a kernel restart the variables it defined are gone" in text
    assert second.run("print('total' in globals())").text().strip() == "False"
    assert second.run("prices = [1, 2, 3]").status == "ok"  # the person's own cells, run again
    again = second.run("%agent_resume kt --rerun-python")
    assert "ran the 1 recorded run_python call(s) again first: tool:2:0:toolu_run: re-ran" in again.text()
    assert second.run("print(total)").text().strip() == "6"
    assert len(server.requests) == 4  # resuming a finished run asked the model nothing


def test_run_python_denied_is_not_run_and_the_model_is_told(tmp_path: Path, kernels: tuple[Any, MessagesAPIServer]) -> None:
    start, server = kernels
    kernel = start()
    assert kernel.run("prices = [1, 2, 3]").status == "ok"
    interactive(kernel, CELL, "n")
    assert kernel.run("print('total' in globals())").text().strip() == "False"
    results = [b for r in server.requests for m in r.body["messages"] if m["role"] == "user" and isinstance(m["content"], list)
               for b in m["content"] if b.get("tool_use_id") == "toolu_run"]  # fmt: skip
    assert results and results[-1]["is_error"] and "denied" in results[-1]["content"]
