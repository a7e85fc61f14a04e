"""A three-step run that can be made to die (``os._exit``) at one point of its middle step.

Used by test_crash_injection.py: ``python crash_worker.py STORE EFFECT POLICY EFFECTS_FILE
[POINT]``. Each executed effect appends its name to EFFECTS_FILE (fsynced), so the test
can count what really ran. The crash is injected at the storage seam (a wrapping store)
or inside the step itself, never by patching nb_durable.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Sequence
from typing import Any

from nb_durable import EventLog, InDoubtError, OutcomeUnknown, open_store, run_step
from nb_durable.core.stores import Store, StoreWriter

CRASH_CODE = 86


def die() -> None:
    sys.stdout.flush()
    os._exit(CRASH_CODE)


class CrashingWriter:
    def __init__(self, inner: StoreWriter, point: str) -> None:
        self.inner = inner
        self.point = point

    def load(self) -> Any:
        return self.inner.load()

    def truncate(self, keep: int) -> None:
        self.inner.truncate(keep)

    def close(self) -> None:
        self.inner.close()

    def put_index(self, row: Any) -> None:
        self.inner.put_index(row)

    def append(self, lines: Sequence[bytes], first_seq: int, *, sync: bool, index: Any = None) -> None:
        kind = json.loads(lines[0])["kind"]
        is_act = b'"step":"act"' in lines[0]
        if is_act and kind == "step_started" and self.point == "before_intent":
            die()
        self.inner.append(lines, first_seq, sync=sync, index=index)
        if is_act and kind == "step_started" and self.point == "after_intent":
            die()
        if is_act and kind == "step_completed" and self.point == "after_record":
            die()


class CrashingStore:
    def __init__(self, inner: Store, point: str) -> None:
        self.inner = inner
        self.point = point
        self.url = inner.url
        self.key = inner.key

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def run_ids(self) -> list[str]:
        return self.inner.run_ids()

    def load(self, run_id: str) -> Any:
        return self.inner.load(run_id)

    def holder(self, run_id: str) -> Any:
        return self.inner.holder(run_id)

    def location(self, run_id: str) -> str:
        return self.inner.location(run_id)

    def open_writer(self, run_id: str) -> CrashingWriter:
        return CrashingWriter(self.inner.open_writer(run_id), self.point)


def main(store_url: str, effect: str, policy: str, effects_file: str, point: str = "") -> None:
    def do(name: str) -> None:
        fd = os.open(effects_file, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
        os.write(fd, (name + "\n").encode())
        os.fsync(fd)
        os.close(fd)

    def act() -> str:
        if point in ("before_intent", "after_intent") and effect == "pure":
            die()  # a pure step has no intent: dying before it runs is the same point
        do("act")
        if point == "after_effect":
            die()
        return "acted"

    def prepare() -> str:
        do("prepare")
        return "prepared"

    store = open_store(store_url)
    log = EventLog("crash", CrashingStore(store, point) if point else store, in_doubt=policy)  # type: ignore[arg-type]
    try:
        first = run_step(log, "prepare", prepare)
        second = run_step(log, "act", act, effect=effect)  # type: ignore[arg-type]
        third = run_step(log, "report", lambda: f"{first}+{'unknown' if isinstance(second, OutcomeUnknown) else second}")
    except InDoubtError as e:
        print(json.dumps({"in_doubt": e.step_id}))
        return
    log.finish_run("completed", output=third)
    print(json.dumps({"output": third}))


if __name__ == "__main__":
    main(*sys.argv[1:])
