"""The test session's own environment, which the suite's time depends on (``tests/conftest.py``)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.conftest import subprocess_env


def test_the_sessions_python_processes_write_bytecode(tmp_path: Path) -> None:
    # Each of the suite's Python processes imports the package from the checkout; where bytecode
    # is not written (an image that sets PYTHONDONTWRITEBYTECODE), each compiles it all again.
    assert not sys.dont_write_bytecode, "this xdist worker writes no bytecode"
    (tmp_path / "probe.py").write_text("X = 1\n", encoding="utf-8")
    subprocess.run([sys.executable, "-c", "import probe"], cwd=tmp_path, env=subprocess_env(), check=True, timeout=60)
    assert list(tmp_path.glob("__pycache__/probe.*.pyc")), "a child of the session wrote no bytecode for what it imported"
