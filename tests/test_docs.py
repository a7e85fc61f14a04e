"""The documentation site builds strictly, offline, and strict mode really fails a broken link.

* ``mkdocs build --strict`` of ``mkdocs.yml`` succeeds: every link and anchor of ``docs/``
  resolves, every page is in the nav, and the tutorials (``docs/tutorials``, a link to
  ``notebooks/``) are rendered as pages without being executed.
* The site loads nothing from the network when a page is read: no stylesheet, script or web
  font from another host (``theme.font: false``), and the build wrote nothing into the checkout.
* A copy of the docs with one broken link fails the same build, naming the page and the target,
  so the first test cannot pass by strict mode being off.
* Every page of ``docs/`` (and every tutorial) is in the nav.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml  # type: ignore[import-untyped]  # mkdocs brings PyYAML, without its stubs

REPO = Path(__file__).resolve().parents[1]


def build(config: Path, site: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file", str(config), "--site-dir", str(site)],
        cwd=config.parent, env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        capture_output=True, text=True, timeout=240, check=False,
    )  # fmt: skip


WRITTEN_BY_A_BUILD = [REPO / ".cache", REPO / "site", REPO / "docs" / ".cache"]
"""Where MkDocs and its plugins write unless told otherwise (mkdocs-jupyter's cache, the site)."""


@pytest.mark.slow(40)
def test_the_site_builds_strictly_and_offline(tmp_path: Path) -> None:
    before = [p for p in WRITTEN_BY_A_BUILD if p.exists()]
    done = build(REPO / "mkdocs.yml", tmp_path / "site")
    assert done.returncode == 0, done.stderr[-4000:]
    assert "WARNING" not in done.stderr, done.stderr[-4000:]
    site = tmp_path / "site"
    for page in ["index", "cli", "configuration", "mcp", "tutorials/01_the_failure_mode"]:
        assert (site / page / "index.html").is_file() if page != "index" else (site / "index.html").is_file(), page
    html = {p: p.read_text(encoding="utf-8") for p in site.rglob("*.html")}
    # Loaded as the page is read: a stylesheet, a script, a font. Links a reader clicks are fine.
    fetched = re.compile(r"<(?:link[^>]*rel=\"stylesheet\"[^>]*href|script[^>]*src)=\"(https?:)?//", re.I)
    offenders = [str(p.relative_to(site)) for p, text in html.items() if fetched.search(text)]
    assert offenders == [], "a page loads an asset from another host"
    assert not any("fonts.googleapis" in text or "fonts.gstatic" in text for text in html.values())
    # The tutorials are shown as committed: their code, and no outputs made by the build.
    failure_mode = html[site / "tutorials" / "01_the_failure_mode" / "index.html"]
    assert "run_step" in failure_mode
    assert [p for p in WRITTEN_BY_A_BUILD if p.exists()] == before, "the build wrote into the checkout"


@pytest.mark.slow(40)
def test_a_broken_link_fails_the_build(tmp_path: Path) -> None:
    copy = tmp_path / "copy"
    copy.mkdir()
    shutil.copy(REPO / "mkdocs.yml", copy / "mkdocs.yml")
    shutil.copytree(REPO / "docs", copy / "docs", symlinks=False, ignore=shutil.ignore_patterns("tutorial-runs"))
    stores = copy / "docs" / "stores.md"
    stores.write_text(stores.read_text() + "\nSee [the old page](no-such-page.md).\n")
    done = build(copy / "mkdocs.yml", tmp_path / "site")
    assert done.returncode != 0
    assert "no-such-page.md" in done.stderr and "stores.md" in done.stderr, done.stderr[-4000:]


def nav_pages(nav: object) -> list[str]:
    if isinstance(nav, str):
        return [nav]
    if isinstance(nav, list):
        return [p for item in nav for p in nav_pages(item)]
    if isinstance(nav, dict):
        return [p for value in nav.values() for p in nav_pages(value)]
    return []


def test_every_page_and_tutorial_is_in_the_nav() -> None:
    config = yaml.safe_load((REPO / "mkdocs.yml").read_text())
    pages = set(nav_pages(config["nav"]))
    on_disk = {p.name for p in (REPO / "docs").glob("*.md")}
    on_disk |= {f"tutorials/{p.name}" for p in (REPO / "notebooks").glob("*.ipynb")}
    assert pages == on_disk
    assert config["theme"]["font"] is False, "web fonts would be fetched from Google when a page is read"
