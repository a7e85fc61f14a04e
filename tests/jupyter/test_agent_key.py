"""``%agent_key`` sets a key in a real kernel through a hidden prompt, never showing it (issue 14, item 12).

The kernel asks on the stdin channel with ``password: true`` (the front end's hidden box);
the key typed there is set in the kernel's environment, the agent then uses it (the loopback
API sees it), and nothing the kernel sent to the notebook (iopub: outputs, the echoed input)
holds it. An empty answer and a name that is not a credential's are refused, and where no one
can be asked (``allow_stdin=False``, as under nbclient) the magic says what to do instead.
The tutorial and the README never suggest ``%env`` for a key.
"""

from __future__ import annotations

import json
import os
import queue
import re
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import REPO
from tests.fakes import MessagesAPIServer, ScriptedScenario, reply
from tests.jupyter.kernels import CellRun, Kernel

KEY = "sk-ant-api03-typed-into-a-hidden-prompt-" + "Z" * 24


def _answered(kernel: Kernel, code: str, answer: str) -> tuple[CellRun, dict]:
    """Run ``code`` with stdin allowed, answer its one input request with ``answer``."""
    run = CellRun(kernel.client.execute(code, allow_stdin=True))
    try:
        request = kernel.client.get_stdin_msg(timeout=30)
    except queue.Empty:
        raise AssertionError(f"no input request; the cell printed {kernel.collect(run, timeout=5).text()}") from None
    kernel.client.input(answer)
    return kernel.collect(run), request["content"]


@pytest.mark.kernel
def test_agent_key_sets_the_key_through_a_hidden_prompt_and_never_shows_it(tmp_path: Path) -> None:
    with MessagesAPIServer(ScriptedScenario([reply("Hello.")])) as server:
        kernel = Kernel(tmp_path, ANTHROPIC_BASE_URL=server.url)
        try:
            assert kernel.run("%load_ext nb_durable").status == "ok"
            done, request = _answered(kernel, "%agent_key", KEY)
            assert request["password"] is True and "ANTHROPIC_API_KEY" in request["prompt"]
            assert done.status == "ok", done.text()
            assert f"ANTHROPIC_API_KEY is set for this kernel ({len(KEY)} characters, not shown)" in done.text()
            used = kernel.run("%%agent --run hi --model claude-test-1 --workspace .\nSay hello.")
            assert used.status == "ok", used.text()
            assert server.requests[0].headers["authorization"] == f"Bearer {KEY}"

            empty, _ = _answered(kernel, "%agent_key", "   ")
            assert empty.status == "error" and "nothing was entered, so ANTHROPIC_API_KEY is unchanged" in empty.text()
            path = kernel.run("%agent_key PATH")
            assert path.status == "error" and "PATH is not named like a credential" in path.text()
            nobody = kernel.run("%agent_key")  # allow_stdin=False: no one to ask
            assert nobody.status == "error" and "cannot ask for input" in nobody.text()
            outputs = json.dumps([o["content"] for r in (done, used, empty, path, nobody) for o in r.outputs])
        finally:
            kernel.close()
    assert KEY not in outputs and KEY[13:40] not in outputs


def test_no_tutorial_or_readme_suggests_env_for_a_key() -> None:
    texts = {p: p.read_text() for p in [REPO / "README.md", *REPO.glob("docs/*.md"), *REPO.glob("notebooks/*.ipynb")]}
    offenders = [str(p) for p, t in texts.items() if re.search(r"%env\s+\w*(KEY|TOKEN|SECRET|PASSWORD)", t, re.I)]
    assert offenders == []
    assert "%agent_key" in texts[REPO / "notebooks" / "05_surviving_the_cause.ipynb"]
    assert "%agent_key" in texts[REPO / "README.md"]


def test_an_input_that_ends_before_a_key_is_typed_is_said_not_a_traceback(ip: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Ctrl-D at the prompt of a terminal IPython (or a closed stdin) raised a bare EOFError."""
    import getpass

    from IPython.core.error import UsageError

    def ended(prompt: str) -> str:
        raise EOFError

    monkeypatch.setattr(getpass, "getpass", ended)
    monkeypatch.delenv("NBD_TEST_KEY", raising=False)
    with pytest.raises(UsageError, match="no key was typed .*NBD_TEST_KEY is unchanged; run %agent_key again"):
        ip.run_line_magic("agent_key", "NBD_TEST_KEY")
    assert "NBD_TEST_KEY" not in os.environ
