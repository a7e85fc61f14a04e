"""Binder's own reading of ``binder/``: ``jupyter-repo2docker --no-build --debug`` prints the
Dockerfile Binder would build, without Docker, and it must install what the tutorials need.

What must hold, in the Dockerfile repo2docker prints for this checkout: the Python of
``binder/runtime.txt`` is the one it builds; ``binder/requirements.txt`` is copied in and
installed with pip from the repository's root (so its ``.`` line installs nb_durable); and
nothing else in the repository (a root requirements.txt, an environment.yml) is read instead.
``test_binder.py`` rehearses that install in a fresh venv; this checks that Binder would do it.
"""

from __future__ import annotations

import re
import subprocess
import sys

from tests.conftest import REPO


def test_repo2docker_installs_binder_requirements_with_the_runtime_python() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "repo2docker", "--no-build", "--debug", str(REPO)],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    dockerfile, said = done.stdout, done.stderr
    runtime = (REPO / "binder" / "runtime.txt").read_text().strip()
    assert re.fullmatch(r"python-3\.\d+", runtime), runtime
    assert f"environment for python={runtime.removeprefix('python-')}" in said, said
    copy = dockerfile.index("COPY --chown=0:0 src/binder/requirements.txt ${REPO_DIR}/binder/requirements.txt")
    install = dockerfile.index('pip install --no-cache-dir -r "binder/requirements.txt"')
    workdir = dockerfile.rindex("WORKDIR ${REPO_DIR}", 0, install)
    assert workdir < copy < install, "requirements are copied in, then installed from the repository's root"
    assert dockerfile.count("pip install") == 1, "binder/requirements.txt is the only thing pip installs"
    lines = (REPO / "binder" / "requirements.txt").read_text().split("\n")
    assert "." in [line.strip() for line in lines], "the requirements install nb_durable itself"
