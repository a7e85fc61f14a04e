"""The PostgreSQL store against DBOS and LangGraph's PostgresSaver, side by side in one run.

Everything runs against one private PostgreSQL server that this script starts (as the tests
do, through ``tests/pg.py``) with the server's real durability: fsync on, synchronous_commit
on. Each contender gets its own database on it. Per step, for N steps that each return a
small JSON result:

record   a fresh run: nb_durable ``EventLog`` + ``run_step`` (``durability="full"``: every
         record committed with synchronous_commit on before the run moves on; ``"process"``
         beside it); DBOS: a ``@DBOS.workflow`` calling a ``@DBOS.step`` N times; LangGraph:
         a graph whose node loops N times (a superstep, so a checkpoint, per step), with its
         default ``durability="async"`` and with ``"sync"``. Total time / N.
replay   nb_durable: reopen the run and call ``run_step`` for every step (nothing executes),
         the reopen included. DBOS: what its recovery does after a crash: the finished
         workflow is set back to PENDING and recovered, and the workflow body runs again with
         every step returning its recorded output; only the body is timed (DBOS's recovery
         bookkeeping around it is left out, in its favour). LangGraph does not replay steps,
         it restores the latest checkpoint; its per-step figure is reading back every step's
         checkpoint, the faster of ``saver.list`` and ``get_state_history``.
commits  transactions committed on the server per recorded step, counted in its WAL with
         pg_waldump. Each synchronous commit waits for a flush to disk, so on a slow or busy
         disk record time follows this count; unlike a time, it is the same on any machine.

Durability is compared like for like. "Each step on disk before the next runs": nb_durable
``full``, DBOS, LangGraph ``sync``. "A step survives its process dying": nb_durable
``process`` (the commit has returned, so only a crash of the server itself can lose it),
against every mode of the others, LangGraph's default ``async`` included (which is weaker:
it writes a checkpoint while the next step runs, so a crash can lose it). Ratios are the
faster contender's time over nb_durable's, taken within each repeat (a shared machine drifts
between repeats); medians are printed, and the strictest ratio (nb_durable ``full`` against
the fastest mode of the others, whatever its durability) beside them. The SQLite and JSONL
stores are shown for scale. The target: at least 5x on record and on replay.

DBOS and LangGraph are benchmark-only (``pip install dbos langgraph
langgraph-checkpoint-postgres``); if one cannot be imported or run, the script says exactly
why and still reports the rest.

    python benchmarks/bench_postgres.py            # 500 steps, 3 repeats
    python benchmarks/bench_postgres.py --quick    # 100 steps, 1 repeat (a smoke test)
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import logging
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from importlib import metadata
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from nb_durable import EventLog, open_store, run_step
from nb_durable.core.stores.postgres import PostgresStore
from tests.pg import PostgresServer

TARGET = 5.0
RATIOS = [  # (key, what is compared, whether the target applies)
    ("full", "record, each step on disk (full vs DBOS, PostgresSaver sync)", True),
    ("process", "record, each step survives its process (process vs any mode)", True),
    ("replay", "replay (full vs any mode)", True),
    ("strict", "record, full vs the fastest mode of the others, any durability", False),
]


def result(i: int) -> dict[str, Any]:
    return {"i": i, "ok": True}


def _never() -> Any:
    raise AssertionError("replay must not execute a step")


def timed(fn: Callable[[], Any]) -> float:
    gc.collect()
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


class Contender:
    """One system under test: records a fresh run of n steps, then replays it."""

    name = ""
    each_step_on_disk = True  # whether a step is synced to disk before the next one runs
    on_server = True  # whether it writes to the PostgreSQL server (its commits are counted)

    def record(self, run: str, n: int) -> float:
        raise NotImplementedError

    def replay(self, run: str, n: int) -> float:
        raise NotImplementedError

    def close(self) -> None:
        pass


class Ours(Contender):
    def __init__(self, name: str, store: Any, durability: str) -> None:
        self.name = name
        self.store = store
        self.durability = durability
        self.each_step_on_disk = durability == "full"
        self.on_server = isinstance(store, PostgresStore)

    def record(self, run: str, n: int) -> float:
        def go() -> None:
            with EventLog(run, self.store, durability=self.durability) as log:  # type: ignore[arg-type]
                if log.steps:
                    raise RuntimeError(f"run {run} exists already: recording it would only replay it")
                for i in range(n):
                    run_step(log, f"step:{i}", lambda i=i: result(i))

        return timed(go) / n

    def replay(self, run: str, n: int) -> float:
        def go() -> None:
            with EventLog(run, self.store) as log:
                for i in range(n):
                    run_step(log, f"step:{i}", _never)
                assert not log.replaying

        return timed(go) / n


class Dbos(Contender):
    def __init__(self, url: str) -> None:
        from dbos import DBOS, DBOSConfig, SetWorkflowID

        self.version = metadata.version("dbos")
        self.name = f"DBOS {self.version} (@workflow + @step)"
        self.DBOS = DBOS
        self.SetWorkflowID = SetWorkflowID
        self.url = url
        self.executed = 0
        self.body: dict[str, float] = {}
        config: DBOSConfig = {"name": "nb-durable-bench", "system_database_url": url, "log_level": "WARNING"}
        DBOS(config=config)

        @DBOS.step()
        def step(i: int) -> dict[str, Any]:
            self.executed += 1
            return result(i)

        @DBOS.workflow()
        def workflow(n: int) -> Any:
            started = time.perf_counter()
            out = None
            for i in range(n):
                out = step(i)
            self.body[DBOS.workflow_id or ""] = time.perf_counter() - started
            return out

        self.workflow = workflow
        DBOS.launch()

    def record(self, run: str, n: int) -> float:
        def go() -> None:
            with self.SetWorkflowID(run):
                self.workflow(n)

        return timed(go) / n

    def replay(self, run: str, n: int) -> float:
        import psycopg

        # The state a crash after the last step leaves behind: the workflow still PENDING.
        with psycopg.connect(self.url, autocommit=True) as conn:
            conn.execute("UPDATE dbos.workflow_status SET status = 'PENDING' WHERE workflow_uuid = %s", (run,))
        self.executed = 0
        self.body.pop(run, None)
        for handle in self.DBOS._recover_pending_workflows():
            handle.get_result(polling_interval_sec=0.001)
        if self.executed:
            raise RuntimeError(f"DBOS recovery executed {self.executed} steps again instead of replaying them")
        return self.body[run] / n

    def close(self) -> None:
        self.DBOS.destroy()


class LangGraph(Contender):
    def __init__(self, url: str, durability: str) -> None:
        from typing import TypedDict

        from langgraph.checkpoint.postgres import PostgresSaver
        from langgraph.graph import END, START, StateGraph

        self.name = f"LangGraph {metadata.version('langgraph')} PostgresSaver (durability={durability})"
        self.durability = durability
        self.each_step_on_disk = durability == "sync"
        self._saver_cm = PostgresSaver.from_conn_string(url)
        self.saver = self._saver_cm.__enter__()
        self.saver.setup()
        self.limit = 0

        class State(TypedDict):
            i: int
            out: dict[str, Any]

        def node(state: State) -> dict[str, Any]:
            return {"i": state["i"] + 1, "out": result(state["i"])}

        graph = StateGraph(State)
        graph.add_node("step", node)
        graph.add_edge(START, "step")
        graph.add_conditional_edges("step", lambda s: END if s["i"] >= self.limit else "step")
        self.app = graph.compile(checkpointer=self.saver)

    def _config(self, run: str, n: int) -> Any:
        return {"configurable": {"thread_id": run}, "recursion_limit": n + 10}

    def record(self, run: str, n: int) -> float:
        self.limit = n
        return timed(lambda: self.app.invoke({"i": 0, "out": {}}, self._config(run, n), durability=self.durability)) / n

    def replay(self, run: str, n: int) -> float:
        config = self._config(run, n)
        listed = timed(lambda: list(self.saver.list(config))) / n
        history = timed(lambda: list(self.app.get_state_history(config))) / n
        return min(listed, history)

    def close(self) -> None:
        self._saver_cm.__exit__(None, None, None)


def contenders(server: PostgresServer, folder: Path, admin: Any) -> Iterator[Contender | str]:
    """Each contender, or a line saying why it is missing."""
    admin.execute("CREATE DATABASE nb_durable")
    store = open_store(server.url("nb_durable"))
    yield Ours("nb_durable postgres (durability=full)", store, "full")
    yield Ours("nb_durable postgres (durability=process)", store, "process")
    yield Ours("nb_durable sqlite (durability=full)", open_store(f"sqlite:///{folder / 'runs.db'}"), "full")
    yield Ours("nb_durable jsonl (durability=full)", open_store(str(folder / "runs")), "full")
    admin.execute("CREATE DATABASE dbos_sys")
    try:
        yield Dbos(server.url("dbos_sys"))
    except Exception as e:  # an optional contender: say why, go on without it
        yield f"DBOS not measured: {type(e).__name__}: {e} (pip install dbos)"
    admin.execute("CREATE DATABASE langgraph")
    for durability in ("async", "sync"):
        try:
            yield LangGraph(server.url("langgraph"), durability)
        except Exception as e:
            yield (
                f"LangGraph PostgresSaver (durability={durability}) not measured: {type(e).__name__}: {e} "
                "(pip install langgraph langgraph-checkpoint-postgres)"
            )


def commits(server: PostgresServer, admin: Any, start: str, end: str) -> int:
    """Transactions committed between two WAL positions (read with pg_waldump): unlike times,
    the number of commits (each one waits for a WAL flush when synchronous) is the same on
    any machine."""
    deadline = time.monotonic() + 10
    # Asynchronous commits reach the WAL file a moment later (the WAL writer flushes them).
    while not admin.execute("SELECT pg_current_wal_flush_lsn() >= %s::pg_lsn", (end,)).fetchone()[0]:
        if time.monotonic() > deadline:
            raise RuntimeError(f"the server did not flush its WAL up to {end} within 10 s")
        time.sleep(0.05)
    dump = server._run(str(server.bin / "pg_waldump"), "-p", str(server.data / "pg_wal"), "-s", start, "-e", end)
    if dump.returncode != 0:
        raise RuntimeError(f"pg_waldump failed: {dump.stderr.strip()}")
    return sum(1 for line in dump.stdout.splitlines() if "desc: COMMIT" in line)


def cold_resume_ms(url: str, run: str, n: int) -> float:
    """Resuming in a new process: connect, check the schema, take the lease, replay n steps."""

    def go() -> None:
        store = PostgresStore(url)
        with EventLog(run, store) as log:
            for i in range(n):
                run_step(log, f"step:{i}", _never)
        store.close()

    return timed(go) * 1000


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="100 steps, one repeat")
    parser.add_argument("--steps", type=int, default=None)
    parser.add_argument("--repeat", type=int, default=None)
    args = parser.parse_args()
    n = args.steps or (100 if args.quick else 500)
    repeat = args.repeat or (1 if args.quick else 3)
    logging.getLogger("dbos").setLevel(logging.WARNING)

    import psycopg

    server = PostgresServer(fsync=True).start()
    folder = Path(tempfile.mkdtemp(prefix="nb-durable-bench-pg-"))
    admin = psycopg.connect(server.url(), autocommit=True)
    version = admin.execute("SHOW server_version").fetchone()[0]  # type: ignore[index]
    found: list[Contender] = []
    notes: list[str] = []
    load = os.getloadavg()[0]
    try:
        for c in contenders(server, folder, admin):
            (notes if isinstance(c, str) else found).append(c)  # type: ignore[arg-type]
        times: dict[str, dict[str, list[float]]] = {c.name: {"record": [], "replay": []} for c in found}
        per_step: dict[str, float] = {}  # commits per recorded step, from the first repeat
        ratios: dict[str, list[float]] = {key: [] for key, _, _ in RATIOS}
        failed: set[str] = set()
        for r in range(repeat):
            for c in found:
                if c.name in failed:
                    continue
                run = f"bench-{r}-{found.index(c)}"  # contenders may share a store: never the same run
                try:
                    start = admin.execute("SELECT pg_current_wal_insert_lsn()").fetchone()[0]  # type: ignore[index]
                    times[c.name]["record"].append(c.record(run, n))
                    end = admin.execute("SELECT pg_current_wal_insert_lsn()").fetchone()[0]  # type: ignore[index]
                    if c.on_server and c.name not in per_step:
                        per_step[c.name] = commits(server, admin, str(start), str(end)) / n
                    times[c.name]["replay"].append(c.replay(run, n))
                except Exception as e:
                    failed.add(c.name)
                    notes.append(f"{c.name} failed: {type(e).__name__}: {e}")
            last = {c.name: {k: v[-1] for k, v in times[c.name].items()} for c in found if c.name not in failed}
            if found[0].name not in last or found[1].name not in last:
                continue
            full, process = last[found[0].name], last[found[1].name]
            others = [c for c in found if not c.name.startswith("nb_durable") and c.name in last]
            synced = [last[c.name]["record"] for c in others if c.each_step_on_disk]
            if others:
                fastest = min(last[c.name]["record"] for c in others)
                if synced:
                    ratios["full"].append(min(synced) / full["record"])
                ratios["process"].append(fastest / process["record"])
                ratios["replay"].append(min(last[c.name]["replay"] for c in others) / full["replay"])
                ratios["strict"].append(fastest / full["record"])
        cold = cold_resume_ms(server.url("nb_durable"), "bench-0-0", n)
    finally:
        for c in found:
            with contextlib.suppress(Exception):
                c.close()
        admin.close()
        server.stop()
        shutil.rmtree(folder, ignore_errors=True)

    print(
        f"nb_durable's PostgreSQL store vs DBOS and LangGraph PostgresSaver: {n} steps, {repeat} repeat(s), median; "
        f"one private PostgreSQL {version} on 127.0.0.1, fsync on, synchronous_commit on; "
        f"{os.cpu_count()} CPUs, load average {load:.1f} at the start, {os.getloadavg()[0]:.1f} at the end\n"
    )
    header = f"{'contender':<58} {'record ms/step':>15} {'replay ms/step':>15} {'commits/step':>13}"
    print(header)
    print("-" * len(header))
    for c in found:
        t = times[c.name]
        if c.name in failed:
            print(f"{c.name:<58} {'failed':>15} {'failed':>15}")
            continue
        counted = f"{per_step[c.name]:>13.2f}" if c.name in per_step else f"{'-':>13}"
        print(f"{c.name:<58} {statistics.median(t['record']) * 1e3:>15.3f} {statistics.median(t['replay']) * 1e3:>15.4f} {counted}")
    print(f"\nnb_durable: resuming in a fresh process (connect, schema check, lease, replay {n} steps): {cold:.1f} ms")
    for note in notes:
        print(f"note: {note}")
    if not ratios["replay"]:
        print("\nno DBOS or LangGraph figures to compare with (see the notes above); nb_durable's own figures stand alone")
        return 0
    ok = True
    print("\nthe faster of DBOS and PostgresSaver / nb_durable on PostgreSQL, within each repeat (median):")
    for key, label, checked in RATIOS:
        if not ratios[key]:
            print(f"  [n/a] {label}: no contender measured")
            continue
        ratio = statistics.median(ratios[key])
        ok &= ratio >= TARGET or not checked
        mark = ("ok" if ratio >= TARGET else "MISSED") if checked else "info"
        print(f"  [{mark}] {label}: {ratio:.1f}x faster" + (f" (target >= {TARGET:.0f}x)" if checked else ""))
    print("\nall targets met" if ok else "\nsome targets missed")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
