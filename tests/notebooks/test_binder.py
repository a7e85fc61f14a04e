"""Binder, rehearsed without Docker: build the environment as repo2docker would, run notebook 01.

repo2docker clones the repository, and when ``binder/`` exists it reads only that folder:
``pip install -r binder/requirements.txt`` from the repository root (the ``.`` line installs
nb_durable itself), then ``binder/postBuild`` if there is one. This test does the same in a
fresh venv, from a copy of the checkout, and executes the first notebook with that venv's
nbclient and kernel: nothing from this checkout's environment can leak in (no PYTHONPATH).

It needs the package index, as Binder does, and takes a minute or two. A failed install
fails the test loudly; it never skips. ``NB_DURABLE_BINDER_PYTHON`` names another interpreter
to build the venv with (Binder's runtime.txt asks for python-3.12); the default is the one
running the tests.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from tests.conftest import REPO
from tests.notebooks import NOTEBOOKS, RAISES, cell_text, errors, tags, with_path
from tests.notebooks.claims import Cells, claims_01

IGNORED = shutil.ignore_patterns(
    ".git", ".venv", ".ci-venv", "build", "dist", "*.egg-info", "__pycache__", "*.pyc", ".pytest_cache",
    ".mypy_cache", ".ruff_cache", ".hypothesis", "runs", "tutorial-runs", "*.db", "*.db-wal", "*.db-shm",
    "node_modules",
)

# The kernel listens on Unix sockets, as tests.jupyter.kernels.notebook_client says why; this
# script runs in the Binder venv, which has no tests package to import it from.
RUNNER = """
import os
import shutil
import sys
import tempfile

import nbformat
from nbclient import NotebookClient
from nbformat import v4
from traitlets.config import Config

path, folder = sys.argv[1], sys.argv[2]
nb = nbformat.read(path, as_version=4)
nb.cells.append(v4.new_code_cell("import sys, nb_durable\\nprint(sys.executable)\\nprint(nb_durable.__file__)"))
config = Config()
config.KernelManager.transport = "ipc"
sockets = tempfile.mkdtemp(prefix="nbk-")
config.KernelManager.ip = os.path.join(sockets, "k")
try:
    NotebookClient(nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": folder}}, config=config).execute()
finally:
    nbformat.write(nb, path)
    shutil.rmtree(sockets, ignore_errors=True)
"""

FLOOR = """
import re, sys
from importlib.metadata import metadata

floors = [(3, 0)]
for name in sys.argv[1:]:
    found = re.search(r">=\\s*3\\.(\\d+)", metadata(name).get("Requires-Python") or "")
    floors.append((3, int(found.group(1))) if found else (3, 0))
print("%d.%d" % max(floors))
"""


def run(command: list[str], *, cwd: Path, env: dict[str, str], what: str, timeout: float) -> None:
    """Run a build step; a failure fails the test with the step's output."""
    try:
        done = subprocess.run(
            command, check=False, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
            timeout=timeout,
        )
    except subprocess.TimeoutExpired as e:
        out = e.stdout.decode(errors="replace") if isinstance(e.stdout, bytes) else e.stdout or ""
        pytest.fail(f"{what} did not finish in {timeout:.0f} s:\n{out[-4000:]}")
    if done.returncode != 0:
        pytest.fail(f"{what} failed with exit status {done.returncode}:\n{done.stdout[-6000:]}")


def build_env(venv: Path, data_dir: Path) -> dict[str, str]:
    """What the Binder image's processes see: its env first on PATH, no checkout, no API key."""
    drop = ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "NB_DURABLE_STORE", "JUPYTER_PATH")
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANTHROPIC_") and k not in drop}
    env.update(
        VIRTUAL_ENV=str(venv),
        PIP_DISABLE_PIP_VERSION_CHECK="1",
        JUPYTER_DATA_DIR=str(data_dir),  # no kernelspec of this machine's user can stand in for the venv's
        NB_DURABLE_DEMO_LATENCY="0.1",
    )
    return with_path(env, venv / "bin")


@pytest.mark.timeout(1500)
@pytest.mark.kernel
@pytest.mark.slow(150)
def test_binder_environment_builds_and_runs_the_first_notebook(tmp_path: Path) -> None:
    python = os.environ.get("NB_DURABLE_BINDER_PYTHON") or sys.executable
    repo = tmp_path / "repo"
    shutil.copytree(REPO, repo, ignore=IGNORED)
    assert (repo / "binder" / "requirements.txt").is_file()
    lines = [line.strip() for line in (repo / "binder" / "requirements.txt").read_text().splitlines()]
    assert "." in lines, "without a '.' line Binder would not install nb_durable"
    assert (repo / "binder" / "runtime.txt").read_text().strip() == "python-3.12"

    venv = tmp_path / "venv"
    env = build_env(venv, tmp_path / "jupyter-data")
    run([python, "-m", "venv", str(venv)], cwd=tmp_path, env=env, what="python -m venv", timeout=300)
    # --no-compile: byte-compiling every installed module is 40% of pip's CPU here (33 s -> 19 s)
    # and tells nothing about whether the environment installs and runs.
    run(
        [str(venv / "bin" / "python"), "-m", "pip", "install", "--no-compile", "-r", "binder/requirements.txt"],
        cwd=repo,
        env=env,
        what="pip install -r binder/requirements.txt",
        timeout=1200,
    )
    # The docs' "Python 3.N or newer" for the tutorials is the newest floor of what the pins installed:
    # README said 3.10 for everything, where pip refuses IPython 9 and ipykernel 7.
    floor = subprocess.run(
        [str(venv / "bin" / "python"), "-c", FLOOR, *(line.split("==")[0] for line in lines if "==" in line)],
        check=True, capture_output=True, text=True, env=env,
    ).stdout.strip()
    for doc in ("README.md", "docs/tutorials.md"):
        assert f"Python {floor} or newer" in " ".join((repo / doc).read_text().split()), f"{doc} does not say Python {floor}"
    post_build = repo / "binder" / "postBuild"
    if post_build.exists():
        post_build.chmod(0o755)
        run([str(post_build)], cwd=repo, env=env, what="binder/postBuild", timeout=600)

    first = NOTEBOOKS[0]
    notebook = repo / "notebooks" / first.name
    runner = tmp_path / "run_notebook.py"
    runner.write_text(RUNNER)
    run(
        [str(venv / "bin" / "python"), str(runner), str(notebook), str(notebook.parent)],
        cwd=notebook.parent,
        env=env,
        what=f"executing {first.name} with the Binder environment's nbclient",
        timeout=600,
    )

    nb = nbformat.read(notebook, as_version=4)
    unexpected = {i: errors(c) for i, c in enumerate(nb.cells) if errors(c) and RAISES not in tags(c)}
    assert unexpected == {}
    executable, package = cell_text(nb.cells[-1]).split()
    assert Path(executable).parent == venv / "bin", "the kernel is the Binder environment's Python"
    assert Path(package).is_relative_to(venv), "nb_durable is the installed package, not the checkout"
    nb.cells.pop()
    claims_01(Cells(nb))
