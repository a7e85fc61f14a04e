"""The README's picture, ``docs/timeline.png``, is a real run of the offline demo in JupyterLab.

A Jupyter server with no key in its environment (as a newcomer's), a notebook of the cells the
README gives: ``%load_ext nb_durable``, ``%%agent`` with the demo task (the demo model fixes
the bundled project with the real tools), whose kernel is SIGKILLed while step 8, a model
call, is in flight, and after Lab restarts the kernel, ``%load_ext nb_durable`` and
``%agent_resume``, whose timeline shows the seven recorded steps replayed, then the rest live,
then the answer. The killed cell keeps what it showed (seven live rows, one in flight) and
says how to go on. The dollars on screen are labelled simulated.

With ``NB_DURABLE_WRITE_SCREENSHOT=1`` the screenshot is written to ``docs/timeline.png``;
always, it lands in the screenshots folder, and the committed picture is checked: a whole PNG
(every chunk's CRC, the image data inflates), of the width this test takes and a sensible height.
"""

from __future__ import annotations

import os
import shutil
import struct
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from nb_durable.agent.models.demo import DEMO_TASK
from tests.e2e.browser import ConsoleErrors
from tests.e2e.lab import LIGHT, LabServer, start_lab, write_notebook
from tests.e2e.notebook_page import NotebookPage
from tests.e2e.test_lab import new_kernel_pid, states

PICTURE = Path(__file__).resolve().parents[2] / "docs" / "timeline.png"
WRITE = "NB_DURABLE_WRITE_SCREENSHOT"
SIZE = {"width": 1280, "height": 1180}
"""Tall enough for both timelines and the answer without scrolling."""
KILLED_IN = 8
"""The step in flight when the kernel is killed: model turn 3, after the first test run."""


@pytest.fixture(scope="module")
def offline_lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LabServer]:
    """A Jupyter server whose kernels have no key: the magics use the demo model, as they say."""
    server = start_lab(tmp_path_factory.mktemp("offline-lab"), theme=LIGHT)
    try:
        yield server
    finally:
        server.stop()


def png_size(data: bytes) -> tuple[int, int]:
    """The width and height of a whole PNG; raises AssertionError on a damaged or cut one."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    at, chunks, idat = 8, [], b""
    while at < len(data):
        (length,) = struct.unpack(">I", data[at : at + 4])
        kind, body = data[at + 4 : at + 8], data[at + 8 : at + 8 + length]
        (crc,) = struct.unpack(">I", data[at + 8 + length : at + 12 + length])
        assert zlib.crc32(kind + body) == crc, f"the {kind!r} chunk is damaged"
        chunks.append(kind)
        idat += body if kind == b"IDAT" else b""
        at += 12 + length
    assert chunks[0] == b"IHDR" and chunks[-1] == b"IEND", chunks
    width, height = struct.unpack(">II", data[16:24])
    assert len(zlib.decompress(idat)) > width * height, "the image data is cut short"
    return width, height


@pytest.mark.slow(60)
def test_the_readme_picture_is_a_real_run_of_the_demo(
    offline_lab: LabServer, page: Any, console: ConsoleErrors, screenshots: Path
) -> None:
    page.set_viewport_size(SIZE)
    path = "demo/timeline.ipynb"
    cells = ["%load_ext nb_durable", f"%%agent\n{DEMO_TASK}", "%load_ext nb_durable\n%agent_resume"]
    write_notebook(offline_lab.root / path, cells)
    nb = NotebookPage(page, offline_lab, path)
    nb.hide_left_sidebar()
    nb.run_and_wait(0)
    nb.run_cell(1)
    grown = ["live"] * (KILLED_IN - 1) + ["in_flight"]
    nb.wait_for(lambda: states(nb, 1) == grown, f"step {KILLED_IN} in flight, every row before it live", timeout=120)
    kernel_id = offline_lab.kernel_id(path)
    new_kernel_pid(offline_lab, nb, kernel_id, offline_lab.kill_kernel(path))
    header = nb.output(1).locator(".nbd-header")
    nb.wait_for(lambda: "the kernel running this stopped" in header.inner_text(), "the killed cell to say how to go on")
    nb.run_and_wait(2, timeout=120)
    assert states(nb, 2) == ["replayed"] * (KILLED_IN - 1) + ["live"] * 5
    resumed = nb.output(2)
    assert resumed.locator(".nbd-header.nbd-run-completed").count() == 1
    assert "The tests pass now" in resumed.locator(".nbd-answer").inner_text()
    money = resumed.locator(".nbd-header").first.inner_text()
    assert "simulated $" in money, f"the demo's dollars are labelled simulated: {money!r}"
    assert states(nb, 1) == grown, "the killed cell keeps the story of its own session"
    assert "offline demo model" in nb.output(1).inner_text(), "the cell says it used the demo model"
    # Command mode, as a reader who has just run the cell sees it: no cursor in an editor.
    nb.cell(2).locator(".jp-InputArea-editor").click()
    page.keyboard.press("Escape")
    nb.wait_for(lambda: page.locator(".jp-Notebook.jp-mod-commandMode").count() > 0, "the notebook in command mode")
    shot = screenshots / "timeline-demo.png"
    page.screenshot(path=str(shot))
    assert png_size(shot.read_bytes()) == (SIZE["width"], SIZE["height"])
    if os.environ.get(WRITE) == "1":
        shutil.copyfile(shot, PICTURE)
    width, height = png_size(PICTURE.read_bytes())
    assert (width, height) == (SIZE["width"], SIZE["height"]), f"regenerate the picture: {WRITE}=1 python -m pytest {__file__}"
    assert 50_000 < PICTURE.stat().st_size < 1_500_000
    console.assert_clean()
