"""One worker poll and one ``nb-durable runs`` page, before (every log read) and after (the run index).

For each store (SQLite, PostgreSQL through ``tests/pg.py``'s private server) and each size
(1,000 and 10,000 runs; ``--sizes 1000,10000,100000`` for more), the store is filled with
agent runs as the write path records them (nine in ten completed, one in ten queued), then:

* poll: the worker's look for its next run. Before: ``list_runs_from_logs`` and the worker's
  filter, the path every poll took until the index (kept here as the baseline). After:
  ``ResumeWorker.candidates(limit=1, claim=True)``, one indexed claim.
* runs: ``nb-durable runs``' data. Before: every log read. After: ``list_runs(limit=100)``.
* deep pages (the line under each): a page of 100 nine tenths down the listing by ``offset``
  (the rows before it counted) and by cursor (``after=``: the index starts at the cursor's key),
  and the first page beside them, then ``%agent_runs``' first page (``runs_table``: the listing,
  each listed parent's unlisted runs below it, the rows' views, the store opened as the magic
  does) (``--pages-only`` times these alone).

Each figure is the median of 5 timings; the ratio is before / after in the same process.
For JSONL (``--stores jsonl``) a second line gives a listing from a fresh store (as each
``nb-durable runs`` makes one), with no sidecar (rebuilt from every log), and with an empty log
in the folder.
Run: ``python benchmarks/bench_index.py [--sizes 1000,10000] [--stores sqlite,jsonl,postgres] [--pages-only] [--children-page] [--tree-walk]``.

Deep pages, measured 2026-12-06 on this machine (load average 1.3 to 2.3), medians of 5:

    sqlite     10000  a page 9,000 runs deep: by offset 14.15ms, by cursor 2.36ms (6x); the first page 2.14ms
    sqlite    100000  a page 90,000 runs deep: by offset 118.33ms, by cursor 2.87ms (41x); the first page 2.29ms
    postgres   10000  a page 9,000 runs deep: by offset 11.19ms, by cursor 3.36ms (3x); the first page 3.25ms
    postgres  100000  a page 90,000 runs deep: by offset 151.43ms, by cursor 3.19ms (47x); the first page 3.59ms
    jsonl      10000  a page 9,000 runs deep: by offset 76.98ms, by cursor 75.12ms (1x); the first page 74.48ms

An offset reads every row it skips, so its cost grows with the depth; a cursor page costs what the
first page does. On JSONL every page reads the whole sidecar anyway, so both cost the same.

With ``%agent_runs``' first page, measured later that day (quiet but for one engineer's tests):

    sqlite     10000  by offset 12.63ms, by cursor 2.15ms; the first page 2.17ms; %agent_runs' 4.54ms
    sqlite    100000  by offset 112.76ms, by cursor 2.17ms; the first page 2.39ms; %agent_runs' 4.64ms
    postgres   10000  by offset 11.42ms, by cursor 3.32ms; the first page 3.41ms; %agent_runs' 10.77ms

With dotted child runs (``--children``: every other finished run started one, so a page of 100
holds some 33), ``%agent_runs``' first page, before (each listed child's log read to learn its
parent) and after (the index row says whose child a run is: ``IndexRow.child``), each side in its
own process, alternated, measured 2026-12-06 (load average 1.9 to 4.0), medians of 5 each:

    store      runs   %agent_runs' first page before          after
    sqlite     10000  22.45, 9.52, 13.81, 14.52ms             8.49, 6.58, 9.96, 7.24ms
    postgres   10000  26.42, 34.76ms                          13.97, 22.33ms
    jsonl       2000  122.53, 117.37ms                        97.82, 97.82ms

A page of one parent and its 50 children (``--children-page``: the store's other runs written
first, so the first page of 51 is that tree), placed in tree order as ``nb-durable runs`` places it,
before (each dotted run's parent read from its log, ``children.parent_of``) and after (the rows'
``child_of``), both in one process, measured 2026-12-06 (load average 2.4 to 2.5), medians of 5:

    store      runs   a log read each   the index   ratio
    sqlite     1000            6.53ms      1.85ms    3.5x
    sqlite    10000            7.95ms      2.47ms    3.2x
    postgres   1000           12.66ms      2.51ms    5.0x
    jsonl      1000           17.48ms      9.83ms    1.8x

The page itself (one indexed query) is all that is left after; before, each child's whole log is
read and decoded, some 0.1 ms a child on SQLite, 0.2 ms on PostgreSQL (a round trip each).

The page and a page by cursor cost the same both sides (SQLite 2.3 ms, PostgreSQL 3.7 to 3.9 ms
by cursor after), the update-time column now never NULL (``index.cursor.sort_time``).

``nb-durable prune --dry-run`` (every run old enough) and ``show --tree`` of a parent with 200
children (``--tree-walk``), before (each dotted run's log read to place it, level by level, and
every run id listed again for each child ``show --tree`` billed) and after (placed by the index
rows, ``children.parents``; the run ids listed once), each version in its own process,
alternated, measured 2026-12-06 (load average 2.7 to 9.4), medians of 5; the ratio of the middle runs:

    store      runs   prune --dry-run before   after        ratio   show --tree before   after      ratio
    sqlite     1200   155, 173, 179ms          41, 42, 41ms  4.2x   260, 277, 246ms      64, 69, 63ms  4.0x
    sqlite    10200   7237, 7030ms             440, 528ms    15x    2891, 2842ms         78, 91ms      34x

What is left of a prune is listing every row (10,000 decoded); a list looked up for each run
deleted cost 0.9 s more at 10,000. The line now gives a prune's time a run too: flat across
sizes while its look-ups are sets, growing with the store if one regressed to a list (no test
can say so without a clock: the figure here is the check).

``show --tree`` from the run index (``rows_below``, ``index_view``: no log read for its lines;
before, each child's log was read for its line and again for each ancestor's bill), each
version in its own process, one after the other, measured 2026-12-07 (load average ~1),
medians of 5:

    store      runs   show --tree before   after   prune --dry-run a run
    sqlite     1200   65.4ms               18.2ms  41.0us
    sqlite    10200   81.4ms               11.0ms  40.3us

The same prune with its two look-ups made lists again (``known`` and ``gone`` in
``retention.prune_runs``, a copy edited for the measure) gave 73.7ms (61.4us a run) at 1,200
runs and 2752.3ms (269.8us a run) at 10,200: the figure a run grows with the store.

``%agent_runs`` is as flat: before its parents' unlisted runs were found by the parent index,
it read every run id of the store (a reviewer's timing: 159.5 ms at 100,000 SQLite runs).
PostgreSQL's adds a connection, since the magic opens the store for each listing.

Measured 2026-12-02 on this 2-core machine shared with other engineers' test suites (load
average 20 to 45), medians of 5:

    store      runs   poll before  poll after   ratio   runs before  runs after   ratio
    sqlite     1000       228.2ms      0.28ms    804x       213.8ms      7.43ms     29x
    sqlite    10000      5209.9ms      0.31ms  16605x      5397.7ms     15.06ms    359x
    postgres   1000      1648.2ms     14.45ms    114x      1476.7ms     17.99ms     82x
    postgres  10000      9572.6ms      3.34ms   2868x      8184.9ms      2.76ms   2971x
    sqlite   100000     15464.0ms      0.28ms  55506x     15072.9ms      2.00ms   7523x

PostgreSQL at 100,000 runs, measured 2026-12-04 on the same machine (load average 8 to 15,
other engineers' suites and this session's worker benchmark beside it; the fill took ~20 min):

    store      runs   poll before  poll after   ratio   runs before  runs after   ratio
    postgres 100000     99963.1ms      1.47ms  67940x    157801.8ms     11.28ms  13990x

JSONL and SQLite, measured 2026-12-06 on the same machine (load average 0.3 to 3), medians of 5;
under each JSONL line, a listing from a fresh store (as each ``nb-durable runs`` makes one), with
no sidecar, and with an empty log in the folder:

    store      runs   poll before  poll after   ratio   runs before  runs after   ratio
    jsonl      1000       145.0ms      5.31ms     27x       134.5ms      7.55ms     18x
                runs from a fresh store 30.1ms; with no sidecar 166.1ms; with an empty log 27.5ms
    jsonl     10000      3389.1ms    143.25ms     24x      2960.3ms    185.70ms     16x
                runs from a fresh store 908.9ms; with no sidecar 5477.0ms; with an empty log 1258.3ms
    jsonl    100000     16484.9ms    786.29ms     21x     15354.3ms    931.05ms     16x
                runs from a fresh store 8299.2ms; with no sidecar 21605.9ms; with an empty log 8329.4ms
    sqlite     1000       122.0ms      0.26ms    470x       138.1ms      3.88ms     36x
    sqlite    10000      1273.7ms      0.17ms   7645x      1293.1ms      2.61ms    495x
    sqlite   100000     12549.0ms      0.18ms  70885x     12792.9ms      2.47ms   5178x

JSONL before and after the sidecar's version 3 (each distinct setting once, values by column, a
page's rows made alone: ``core/stores/jsonl_sidecar.py``), measured 2026-12-06 back to back on the
same machine (load average 1.3 to 4.7, others' suites beside it), medians of 5 (the columns'
before and after are, as above, every log read and the index); each line under one also gives
the sidecar's size:

    before     runs   poll before  poll after   ratio   runs before  runs after   ratio
    jsonl      1000       139.2ms      4.92ms     28x       170.0ms      5.52ms     31x
                runs from a fresh store 32.2ms; with no sidecar 230.5ms; with an empty log 32.3ms; sidecar 1.3 MB
    jsonl     10000      2610.4ms     98.73ms     26x      2057.4ms     82.35ms     25x
                runs from a fresh store 699.0ms; with no sidecar 3203.2ms; with an empty log 1110.9ms; sidecar 12.8 MB
    jsonl    100000     23391.0ms   1129.53ms     21x     14143.6ms   1228.26ms     12x
                runs from a fresh store 7826.4ms; with no sidecar 23451.3ms; with an empty log 9379.4ms; sidecar 128.6 MB
    after
    jsonl      1000       194.4ms      4.05ms     48x       121.0ms      6.00ms     20x
                runs from a fresh store 11.7ms; with no sidecar 184.8ms; with an empty log 11.4ms; sidecar 0.5 MB
    jsonl     10000      1271.8ms     59.93ms     21x      1399.3ms     71.21ms     20x
                runs from a fresh store 177.4ms; with no sidecar 1986.8ms; with an empty log 173.7ms; sidecar 4.6 MB
    jsonl    100000     14780.0ms   1040.38ms     14x     16693.8ms   1219.70ms     14x
                runs from a fresh store 2436.2ms; with no sidecar 23212.5ms; with an empty log 2430.2ms; sidecar 45.9 MB

The 100,000-run line after was measured at the load's peak (4.7; once more at 4.9: a fresh page
2.5 s). One folder of 100,000 runs listed by each version in its own process, in turn, three
times (load 0.9 to 3.4), gave a fresh ``runs`` page 7.6 s, 6.5 s and 7.2 s before, 1.56 s, 1.31 s
and 1.63 s after. A warm poll is unchanged within this machine's noise (nine polls each, twice:
medians 0.75 s and 0.91 s before, 0.89 s and 0.77 s after, single polls 0.53 s to 1.27 s): it is a
stat of every log (0.4 s of it) and the check of each row against its log, which version 3 keeps
as it was, the logs never trusted unseen. A fresh page at 100,000 runs now costs: the sidecar,
46 MB (half of it each run's figures as JSON text), 0.3 s to parse; the stat of every log, 0.4 s;
believing the rows, 0.15 s; filtering and ordering their columns and making 100 rows, 0.2 s.

Before version 3 a JSONL look stats every log and a fresh one parses the whole sidecar (12.8 MB
at 10,000 runs, most of it each run's settings), so it grows with the runs. Until a log with no row stopped marking
the sidecar changed, an empty log made every listing rewrite it (2,000 runs: 314 ms against 122 ms).

A poll after is flat in the number of runs (one indexed claim of one row: 3.34 ms at 10,000
runs, 1.47 ms at 100,000, both within this machine's noise); a runs page reads 100 rows
whatever the store holds (2.76 ms at 10,000, 11.28 ms at 100,000 under a heavier load).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
import warnings
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from nb_durable.agent.delegation.tree import tree_order
from nb_durable.agent.fleet.worker import ResumeWorker
from nb_durable.agent.settings import AgentSettings
from nb_durable.cli.tree_commands import runs_in_tree_order
from nb_durable.core.log import EventLog, run_step
from nb_durable.core.runs import list_runs, list_runs_from_logs
from nb_durable.core.stores import Store, open_store
from nb_durable.core.stores.jsonl_index import SIDECAR
from nb_durable.core.whole_runs.children import child_id, parent_of, start_child
from nb_durable.jupyter.runs_table import runs_table


def fill(store_url: str, count: int, *, children: bool = False) -> None:
    """``count`` runs; with ``children``, every other finished one has started a child run (its
    id the parent's and a dot, as a delegation names it), so a page lists some thirty of them."""
    with open_store(store_url) as store:
        for i in range(count):
            queued = i % 10 == 0
            settings = AgentSettings(task=f"task {i}", model="claude-sonnet-4-5", queued=queued, priority=i % 3).to_json()
            with EventLog(f"run-{i:06d}", store, durability="none") as log:
                log.start_run(settings)
                if not queued:
                    run_step(log, "model:0", lambda: {"message": {"usage": {"input_tokens": 100, "output_tokens": 20}}}, effect="idempotent")
                    if children and i % 2:
                        child = child_id(log.run_id, "tool:0:0:delegate")
                        start_child(log, "tool:0:0:delegate", child, {**settings, "task": f"part of task {i}"})
                        with EventLog(child, store, durability="none") as below:
                            run_step(below, "model:0", lambda: {"message": {"usage": {"input_tokens": 10, "output_tokens": 2}}}, effect="idempotent")
                            below.finish_run("completed", output={"text": "ok"})
                    log.finish_run("completed", output={"text": "ok"})


def timed(fn: Callable[[], object], repeat: int = 5) -> float:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def poll_before(store_url: str) -> None:
    worker = ResumeWorker(store_url)
    found = [s for s in list_runs_from_logs(store_url) if worker.wants(s)]
    found.sort(key=lambda s: (-int(s.settings.get("priority") or 0), s.updated_at or 0.0))


def _jsonl_extra(root: Path) -> str:
    """A JSONL folder's own costs, each listing from a fresh store as ``nb-durable runs`` makes
    one (it parses the whole sidecar): as it is, with no sidecar (the first listing, or one after
    it is lost: every log read), and while an empty log sits in the folder (a run that died as it began)."""
    fresh = timed(lambda: list_runs(str(root), limit=100))
    (root / SIDECAR).unlink()
    cold = timed(lambda: list_runs(str(root), limit=100), repeat=1)
    (root / "died-as-it-began.jsonl").touch()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        empty = timed(lambda: list_runs(str(root), limit=100))
    size = (root / SIDECAR).stat().st_size
    return (
        f"{'':<10} {'':>7}  runs from a fresh store {fresh * 1000:.1f}ms; with no sidecar {cold * 1000:.1f}ms; "
        f"with an empty log beside the runs {empty * 1000:.1f}ms; sidecar {size / 1e6:.1f} MB"
    )


def deep_pages(store: Store, size: int) -> str:
    """A page of 100 runs nine tenths down the listing, by ``offset`` (every run before it
    counted) and by cursor (``after``: the index starts at the cursor's key), in one line."""
    deep = size * 9 // 10
    cursor = list_runs(store, limit=1, offset=deep - 1)[0].cursor
    by_offset = [s.run_id for s in list_runs(store, limit=100, offset=deep)]
    assert by_offset == [s.run_id for s in list_runs(store, limit=100, after=cursor)], "the same page both ways"
    first = timed(lambda: list_runs(store, limit=100))
    offset = timed(lambda: list_runs(store, limit=100, offset=deep))
    after = timed(lambda: list_runs(store, limit=100, after=cursor))
    # %agent_runs' first page: the listing, each listed parent's unlisted runs below it (one
    # indexed query a level), the rows' views; it opens the store as the magic does.
    table = timed(lambda: runs_table(store.url, limit=100))
    return (
        f"{'':<10} {'':>7}  a page {deep:,} runs deep: by offset {offset * 1000:.2f}ms, by cursor {after * 1000:.2f}ms "
        f"({offset / after:.0f}x); the first page {first * 1000:.2f}ms; %agent_runs' first page {table * 1000:.2f}ms"
    )


CHILDREN = 50
"""How many children the parent of ``--children-page`` delegates to: a page holds it and all of them."""


def fill_children_page(store_url: str, children: int = CHILDREN) -> None:
    """A parent run that delegated to ``children`` child runs, each an agent run of one paid model
    call, written after the store's other runs, so the first page of ``children + 1`` is that tree."""
    settings = AgentSettings(task="the parent", model="claude-sonnet-4-5").to_json()
    with open_store(store_url) as store, EventLog("tree-parent", store, durability="none") as parent:
        parent.start_run(settings)
        for i in range(children):
            step = f"tool:0:{i}:delegate"
            child = child_id(parent.run_id, step)
            start_child(parent, step, child, {**settings, "task": f"part {i}"})
            with EventLog(child, store, durability="none") as below:
                run_step(below, "model:0", lambda: {"message": {"usage": {"input_tokens": 10, "output_tokens": 2}}}, effect="idempotent")
                below.finish_run("completed", output={"text": "ok"})
        parent.finish_run("completed", output={"text": "ok"})


def children_page(store: Store) -> str:
    """``nb-durable runs``' page of the parent and its ``CHILDREN`` children, placed in tree order:
    before, each dotted run's parent read from its log (what the listings did until the index row
    said whose child a run is), after, from the rows (``RunSummary.child_of``), in one line."""

    def before() -> list[tuple[str, int]]:
        ids = [s.run_id for s in list_runs(store, limit=CHILDREN + 1)]
        return tree_order(ids, {run_id: parent_of(store, run_id) if "." in run_id else None for run_id in ids})

    def after() -> list[tuple[str, int]]:
        return [(s.run_id, depth) for s, depth in runs_in_tree_order(list_runs(store, limit=CHILDREN + 1))]

    placed = after()
    assert placed == before() and sum(1 for _, depth in placed if depth) == CHILDREN, "the same tree both ways"
    old, new = timed(before), timed(after)
    return (
        f"{'':<10} {'':>7}  a page of {CHILDREN} children under their parent: a log read each {old * 1000:.2f}ms, "
        f"the index {new * 1000:.2f}ms ({old / new:.1f}x)"
    )


TREE_CHILDREN = 200
"""How many children the parent of ``--tree-walk`` delegates to."""


def tree_walk(store: Store) -> str:
    """``nb-durable prune --dry-run`` (every run old enough: each tree walked, listed whole) and
    ``show --tree`` of a parent with ``TREE_CHILDREN`` children, in one line. Only what both
    versions have is called, so each version runs this in its own process (``--tree-walk``)."""
    import contextlib
    import io

    from nb_durable.cli.tree_commands import print_tree
    from nb_durable.core.whole_runs.retention import prune_runs

    def prune() -> int:
        return len(prune_runs("1d", store, dry_run=True, now=time.time() + 2 * 86400).deleted)

    def show() -> str:
        with contextlib.redirect_stdout(io.StringIO()) as out:
            print_tree(store, "tree-parent")
        return out.getvalue()

    runs = prune()
    assert runs == len(store.run_ids()) and show().count("└") == TREE_CHILDREN, "every run, and the whole tree"
    pruning = timed(prune)
    # Per run: flat across sizes while prune's look-ups are sets; a list looked up for each run
    # (quadratic) makes it grow with the store, ten times from 1,200 runs to 10,200.
    return (
        f"{'':<10} {'':>7}  prune --dry-run {pruning * 1000:.1f}ms ({pruning / runs * 1e6:.1f}us a run); "
        f"show --tree of {TREE_CHILDREN} children {timed(show) * 1000:.1f}ms"
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="1000,10000")
    parser.add_argument("--stores", default="sqlite,postgres")
    parser.add_argument("--pages-only", action="store_true", help="time only the deep pages (offset against cursor)")
    parser.add_argument("--children", action="store_true", help="every other finished run starts a child run (dotted ids)")
    parser.add_argument("--children-page", action="store_true", help=f"time only a page of a parent and its {CHILDREN} children")
    parser.add_argument("--tree-walk", action="store_true", help=f"time only prune --dry-run and show --tree of {TREE_CHILDREN} children")
    args = parser.parse_args()
    print(f"{'store':<10} {'runs':>7}  {'poll before':>12} {'poll after':>11} {'ratio':>7}  {'runs before':>12} {'runs after':>11} {'ratio':>7}  {'after/run':>10}")
    for kind in args.stores.split(","):
        for size in (int(s) for s in args.sizes.split(",")):
            with tempfile.TemporaryDirectory() as tmp:
                if kind == "sqlite":
                    url = f"sqlite:///{tmp}/runs.db"
                elif kind == "jsonl":
                    url = f"jsonl://{tmp}/runs"
                else:
                    from tests.pg import postgres_url

                    url = postgres_url()
                fill(url, size, children=args.children)
                if args.tree_walk:
                    fill_children_page(url, TREE_CHILDREN)
                    with open_store(url) as store:
                        print(f"{kind:<10} {size:>7}\n{tree_walk(store)}", flush=True)
                    continue
                if args.children_page:
                    fill_children_page(url)
                    with open_store(url) as store:
                        print(f"{kind:<10} {size:>7}\n{children_page(store)}", flush=True)
                    continue
                if args.pages_only:
                    with open_store(url) as store:
                        print(f"{kind:<10} {size:>7}\n{deep_pages(store, size)}", flush=True)
                    continue
                with open_store(url) as store:
                    worker = ResumeWorker(url)
                    worker._poll_store = store
                    before = timed(lambda url=url: poll_before(url), repeat=3 if size > 10_000 else 5)  # type: ignore[misc]
                    after = timed(lambda worker=worker: worker.candidates(limit=1, claim=True))  # type: ignore[misc]
                    runs_before = timed(lambda: list_runs_from_logs(store), repeat=3 if size > 10_000 else 5)
                    runs_after = timed(lambda: list_runs(store, limit=100))
                    extra = deep_pages(store, size)
                    if kind == "jsonl":
                        extra += "\n" + _jsonl_extra(Path(tmp) / "runs")
                print(
                    f"{kind:<10} {size:>7}  {before * 1000:>10.1f}ms {after * 1000:>9.2f}ms {before / after:>6.0f}x  "
                    f"{runs_before * 1000:>10.1f}ms {runs_after * 1000:>9.2f}ms {runs_before / runs_after:>6.0f}x  "
                    f"{after / size * 1e6:>8.3f}us",
                    flush=True,
                )
                if extra:
                    print(extra, flush=True)


if __name__ == "__main__":
    main()
