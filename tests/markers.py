"""The suite's markers, its xdist groups and its order: what each says, and the checks that keep them true.

Markers. ``pytest -m "not kernel and not browser and not slow"`` is the inner loop: it must
leave out every test that starts a kernel or a browser, so the parts that start them call
``require`` (``tests/jupyter/kernels.py``, ``tests/pg.py``), which fails a test that starts one
without its marker. Markers are given by hand (``@pytest.mark.kernel``) or, where a fixture or
a parameter says it, by ``mark_and_group`` at collection: ``tests/e2e`` is ``browser``, a test
with a ``postgres`` parameter is ``postgres``, one using ``kernels`` or a notebook executed by
``executed`` is ``kernel``. ``@pytest.mark.slow(seconds)`` says roughly how long a test takes
on a loaded 2-core machine (10 if not given).

Groups. Tests that share something costly run on one xdist worker: the browser tests share one
Chromium and one Jupyter server (group ``browser``); tests using a module-scoped fixture (a
recorded run, an executed notebook) share it per module and parameter. ``mark_and_group`` gives
each an ``xdist_group`` marker. xdist's own ``loadgroup`` reads those by rewriting node ids,
which pytest 9.2 no longer lets it do (pytest-xdist#1386: the groups are silently ignored), so
``scheduler`` reads them from a file each worker writes as it collects (``write_groups``); any
other ``--dist`` is xdist's.

Order. Longest first: the browser group, then groups and tests by the seconds of their
``slow`` tests (a kernel test counts 8), then the rest as collected, so the long chains start while short tests fill the other workers.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

__all__ = ["MARKERS", "groups_file", "mark_and_group", "require", "running", "scheduler", "write_groups"]

MARKERS = {
    "kernel": "starts a real IPython kernel (jupyter_client, nbclient)",
    "browser": "drives JupyterLab or Notebook 7 in headless Chromium (tests/e2e)",
    "postgres": "uses the private PostgreSQL server of tests/pg.py",
    "slow(seconds=10)": "takes more than ~5 s on a loaded 2-core machine (the inner loop leaves it out); "
    "seconds, roughly how long, orders the work longest first",
}
BROWSER = "browser"

_running: list[Any] = []  # the test being run (``running``, around each test)


@contextlib.contextmanager
def running(item: Any) -> Iterator[None]:
    """While ``item`` runs, ``require`` checks its markers."""
    _running.append(item)
    try:
        yield
    finally:
        _running.remove(item)


def require(marker: str, what: str) -> None:
    """Fail the running test if it starts ``what`` without being marked ``marker``."""
    if _running and _running[-1].get_closest_marker(marker) is None:
        raise AssertionError(
            f"{_running[-1].nodeid} starts {what} but is not marked {marker!r}: add @pytest.mark.{marker} "
            f"so that pytest -m 'not {marker}' leaves it out"
        )


def _module_params(item: Any) -> str | None:
    """The ids of the module-scoped fixtures ``item`` uses, or None if it uses none."""
    info = getattr(item, "_fixtureinfo", None)
    if info is None:
        return None
    used = sorted(name for name, defs in info.name2fixturedefs.items() if defs and defs[-1].scope == "module")
    if not used:
        return None
    params = getattr(getattr(item, "callspec", None), "params", {})
    return ",".join(f"{name}={params[name]}" if name in params else name for name in used)


def _seconds(item: Any) -> float:
    """Roughly how long ``item`` takes, for the order: its ``slow`` seconds; 8 for a kernel test."""
    mark = item.get_closest_marker("slow")
    if mark is not None:
        return float(mark.args[0] if mark.args else mark.kwargs.get("seconds", 10))
    return 8.0 if item.get_closest_marker("kernel") else 0.0


def mark_and_group(items: list[Any]) -> None:
    """Add the markers fixtures and parameters imply and the xdist groups; order longest first."""
    for item in items:
        path = item.nodeid.split("::", 1)[0]
        names = set(getattr(item, "fixturenames", ()))
        params = getattr(getattr(item, "callspec", None), "params", {})
        if path.startswith("tests/e2e/"):
            item.add_marker(pytest.mark.browser)
            item.add_marker(pytest.mark.xdist_group(BROWSER))
        elif (shared := _module_params(item)) is not None:
            item.add_marker(pytest.mark.xdist_group(f"{path}[{shared}]"))
        if "postgres" in map(str, params.values()):
            item.add_marker(pytest.mark.postgres)
        if names & {"kernels", "executed"}:
            item.add_marker(pytest.mark.kernel)
    # A group moves as a whole, in its own order, so that what it shares is still made once.
    weight: dict[str, float] = {}
    for item in items:
        unit = group_of(item) or item.nodeid
        weight[unit] = weight.get(unit, 0.0) + (1e6 if item.get_closest_marker("browser") else _seconds(item))
    items.sort(key=lambda item: -weight[group_of(item) or item.nodeid])


def group_of(item: Any) -> str | None:
    marks = [m.args[0] if m.args else m.kwargs.get("name", "default") for m in item.iter_markers("xdist_group")]
    return "_".join(sorted(map(str, marks))) if marks else None


def groups_file(config: Any) -> Path | None:
    """Where this session's workers write their tests' groups (None outside an xdist session)."""
    given = getattr(config, "workerinput", {}).get("nb_durable_groups")
    return Path(given) if given else None


def write_groups(config: Any, items: list[Any]) -> None:
    """In a worker: write ``{nodeid: group}`` for the scheduler (every worker writes the same)."""
    path = groups_file(config)
    if path is None:
        return
    groups = {item.nodeid: group for item in items if (group := group_of(item)) is not None}
    partial = path.with_name(f"{path.name}.{os.getpid()}")
    partial.write_text(json.dumps(groups))
    os.replace(partial, path)


def scheduler(config: Any, log: Any, path: Path) -> Any:
    """xdist's ``loadgroup``, its groups read from the workers' file rather than from node ids.

    A test without a group is a unit of its own. The units go out in collection order (longest
    first, see ``mark_and_group``), not re-sorted by their number of tests.
    """
    from xdist.scheduler import LoadGroupScheduling

    class GroupScheduling(LoadGroupScheduling):  # type: ignore[misc]
        def __init__(self) -> None:
            super().__init__(config, log)
            self.groups: dict[str, str] | None = None

        def _split_scope(self, nodeid: str) -> str:
            if self.groups is None:  # read once every worker has collected (scheduling starts then)
                self.groups = json.loads(path.read_text()) if path.exists() else {}
            group = self.groups.get(nodeid)
            return f"@{group}" if group is not None else str(super()._split_scope(nodeid))

    config.option.loadscopereorder = False
    return GroupScheduling()
