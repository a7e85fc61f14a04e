"""Workers resuming SIGKILLed runs on one PostgreSQL server, against DBOS recovering as many.

Runs completed per second with 1, 2 and 4 worker processes, and with one of two SIGKILLed
halfway; then DBOS executors recovering as many interrupted workflows on the same server.

    python benchmarks/bench_worker.py                                  # 100 runs of 19 steps
    python benchmarks/bench_worker.py --runs 24                        # a smoke test
    python benchmarks/bench_worker.py --dbos-python /path/to/venv/bin/python
    python benchmarks/bench_worker.py --repeat 3        # each row's median ratio of 3 measurements

Every run is an agent run of 19 steps (10 model calls through the real SDK to this script's
loopback Messages API, each reply after ``--latency`` seconds, and 9 ``list_dir`` calls); a
worker records one more, its mark of who resumed the run. The runs are started in this process
and stopped as a killed process would leave them (a ``SimulatedCrash`` as their third step
starts), so each needs 17 steps resumed. Then K ``nb-durable worker --concurrency 2`` processes
start on an empty schema of one private PostgreSQL server (``tests/pg.py``); once each has said
it is ready (its banner, printed once the SDK is imported, its client built and the price table
read), the crashed runs are copied in (``copy_runs``) and the workers resume all of them. As
DBOS's executors, launched before they are told to recover, their start-up (~1.5 s of CPU
each) is outside what is measured: before, the first worker's runs began the window while the
others still imported, on the same cores.
Figures, per K:

* *runs/s*: runs completed per second over the resume window, from the first event a worker
  wrote to the last (read from the runs' own timestamps; the wall time from the copy's start
  is printed beside);
* *step p50/p99*: the time between a run's consecutive recorded step results during the
  resume: the model's latency plus what the agent and the store add;
* the same with K=2 and one worker SIGKILLed once half the runs are done (its runs go to the
  other worker when their lease drops);
* where a run's time and CPU go: a model step's time from intent to result (p50), and the CPU
  a run (``/proc``, read before the workers stop, while their database sessions live) of the
  workers since they were ready (a killed one's until its kill), of this process (the loopback
  API, copying the runs in, the progress poll) and of the PostgreSQL server (its postmaster and
  the processes it started, not another cluster on the machine), and their sum; DBOS's the
  same (its executors since they were ready; this process polls DBOS's progress 20 times a
  second, ours twice). With K=4 both sides keep the two cores busy, so runs/s there is CPU a run.

DBOS, right after each K, on a fresh database of the same server (``dbos_recovery.py``): the
same number of workflows of the same shape (each model step a real HTTP request to the same
loopback server carrying what ours carry: the conversation so far, the system prompt, the tool
schemas, streamed; each tool step a directory listing), SIGKILLed inside their third step, then
K executors recovering them two at a time each, with the same figures from DBOS's own step
timestamps and the ratios of each pair. Its steps are bare functions (no SDK, no message
rebuilding), its queue is polled every 0.05 s (its default is 1 s), and an executor killed
halfway is declared dead to the other at once: each in DBOS's favour. DBOS lives in its own
venv, never a dependency: without one the bench says how to make it and reports nb_durable
alone.

Measured on the 2-core machine, 100 runs, 10 ms per reply, DBOS 3.4.0 (ratios of nb_durable's
runs/s to DBOS's at K=1, 2, 4 and 2 with one SIGKILLed; runs/s at K=1 and K=4, ours / DBOS's):

    2026-12-06, start of day, load ~1.5   1.29  1.25  1.08  1.19   10.4 / 8.1;  24.3 / 22.4
    2026-12-06, end of day, quiet         1.43  1.20  1.05  1.44   10.5 / 7.3;  25.4 / 24.1
    2026-12-06, evening, start, quiet     1.27  1.16  1.18  1.10   10.0 / 7.8;  17.7 / 15.0
    2026-12-06, evening, middle, quiet    1.35  1.21  1.32  1.32    9.9 / 7.4;  22.3 / 16.8
    2026-12-06, evening, end, quiet       1.44  1.33  1.06  1.42   10.6 / 7.3;  22.0 / 20.9
    2026-12-06, night, 1st of 3, quiet    1.31  1.12  1.12  1.22   11.9 / 9.1;  28.8 / 25.8
    2026-12-06, night, 2nd of 3, quiet    1.37  1.07  1.26  1.21    9.8 / 7.1;  22.7 / 17.9
    2026-12-06, night, 3rd of 3, quiet    1.19  1.18  0.94  1.17    8.9 / 7.5;  16.3 / 17.3
    2026-12-06, night, medians (--repeat) 1.31  1.12  1.12  1.21
    2026-12-06, late, 1st of 2, quiet     1.13  1.45  1.51  1.44   10.4 / 9.2;  27.5 / 18.3
    2026-12-06, late, 2nd of 2, quiet     1.28  1.41  1.32  1.41   10.9 / 8.5;  18.2 / 13.8
    2026-12-07, 1st of 2, quiet           1.43  1.18  1.27  1.39    9.9 / 6.9;  18.8 / 14.8
    2026-12-07, 2nd of 2, quiet           1.22  1.37  0.95  1.38    9.7 / 7.9;  17.0 / 17.9
    2026-12-07, the same requests, 1st    1.38  1.19  1.52  1.54   10.2 / 7.4;  21.2 / 13.9
    2026-12-07, the same requests, 2nd    1.37  1.42  1.37  1.53    9.3 / 6.8;  18.5 / 13.5
    2026-12-07, the same requests, 3rd    1.43  1.28  1.62  1.43   10.6 / 7.4;  29.1 / 18.0
    2026-12-07, the same requests, 4th    1.55  1.68  1.76  1.22   11.3 / 7.3;  22.3 / 12.7
    2026-12-07, medians of the four       1.41  1.35  1.57  1.48   (lowest 1.37, 1.19, 1.37, 1.22)
    2026-12-07, later, 1st                1.33  1.28  1.62  1.42   11.8 / 8.9;  33.6 / 20.8
    2026-12-07, later, 2nd                  -   1.30  1.24  1.52   11.2 / -  ;  22.4 / 18.1
    2026-12-07, later, 3rd                1.79  1.21  1.44  1.39   10.5 / 5.9;  23.0 / 15.9
    2026-12-07, later, 4th                1.48  1.49  1.37  1.52   11.0 / 7.5;  23.3 / 16.9
    2026-12-07, later, 5th, host slowed   1.55  1.57  2.28  1.00    9.8 / 6.3;  19.2 /  8.4
    2026-12-07, later, 6th                1.50  1.37  1.65  1.45    9.8 / 6.5;  21.3 / 12.9
    2026-12-07, later, 7th                1.53  1.63  1.50  1.47    9.7 / 6.3;  17.4 / 11.7
    2026-12-07, later, medians            1.51  1.37  1.50  1.45   (lowest 1.33, 1.21, 1.24, 1.00)
    2026-12-07, morning, 1st              1.54  1.23  1.43  1.46   10.3 / 6.7;  29.1 / 20.4
    2026-12-07, morning, 2nd              1.39  1.61  2.16  1.25   11.1 / 8.0;  31.4 / 14.5
    2026-12-07, morning, 3rd              1.26  1.48  1.58    -    11.7 / 9.3;  34.6 / 21.9
    2026-12-07, morning, 4th              1.37  1.47  1.14  1.59   12.7 / 9.3;  25.0 / 22.0
    2026-12-07, morning, 5th              1.35  1.34  1.46  1.31   11.4 / 8.4;  31.8 / 21.8
    2026-12-07, morning, 6th              1.40  1.51  1.54  1.23   12.5 / 8.9;  34.1 / 22.2
    2026-12-07, morning, medians          1.38  1.48  1.50  1.31   (lowest 1.26, 1.23, 1.14, 1.23)
    2026-12-07, midday, 1st               1.27  1.54  1.81  1.54   11.2 / 8.8;  33.6 / 18.6
    2026-12-07, midday, 2nd               1.70  1.39  1.51  1.50   12.1 / 7.1;  26.9 / 17.8
    2026-12-07, midday, 3rd               1.37  1.33  1.47  1.47   12.7 / 9.3;  30.5 / 20.8
    2026-12-07, midday, 4th               1.60  1.32  1.68  1.57   12.9 / 8.0;  30.5 / 18.1
    2026-12-07, midday, 5th               1.39  1.43  1.32  1.38   12.5 / 9.0;  31.4 / 23.8
    2026-12-07, midday, 6th               1.31  1.48  1.29  1.30   11.7 / 8.9;  26.5 / 20.6
    2026-12-07, midday, medians of six    1.38  1.41  1.49  1.48   (lowest 1.27, 1.32, 1.29, 1.30)
    2026-12-07, afternoon, before, 1st    1.43  1.58  1.52  1.59   11.3 / 7.9;  25.2 / 16.6
    2026-12-07, afternoon, before, 2nd    1.45  1.77  1.24  1.34   11.3 / 7.8;  24.5 / 19.8
    2026-12-07, afternoon, before, 3rd    1.49  1.58  1.47  1.25   10.6 / 7.1;  26.2 / 17.8
    2026-12-07, afternoon, before, 4th    1.37  1.52  1.81  1.55   10.2 / 7.4;  27.5 / 15.2
    2026-12-07, afternoon, before, med.   1.44  1.58  1.50  1.45   (lowest 1.37, 1.52, 1.24, 1.25)
    2026-12-07, afternoon, after, 1st     1.45  1.49  1.49  1.32   11.0 / 7.6;  23.2 / 15.6
    2026-12-07, afternoon, after, 2nd     1.36  1.41  1.82  1.65   10.1 / 7.4;  26.8 / 14.8
    2026-12-07, afternoon, after, 3rd     1.28  1.34  1.46  1.33    9.9 / 7.7;  25.2 / 17.3
    2026-12-07, afternoon, after, 4th     1.51  1.45  1.27  1.67   10.9 / 7.2;  25.4 / 20.0
    2026-12-07, afternoon, after, 5th     1.35  1.43  1.47  1.24   10.1 / 7.5;  25.7 / 17.5
    2026-12-07, afternoon, after, 6th     1.36  1.29  1.53  1.20   11.7 / 8.5;  26.2 / 17.1
    2026-12-07, afternoon, after, med.    1.36  1.42  1.48  1.33   (lowest 1.28, 1.29, 1.27, 1.20)
    2026-12-07, evening, 1st              1.33  1.28  1.81  1.33   11.0 / 8.3;  27.6 / 15.3
    2026-12-07, evening, 2nd              1.58  1.51  1.47  1.35   11.4 / 7.2;  26.9 / 18.3
    2026-12-07, evening, 3rd              1.24  1.36  1.71  1.30   10.6 / 8.5;  32.5 / 19.0
    2026-12-07, evening, medians          1.33  1.36  1.71  1.33   (lowest 1.24, 1.28, 1.47, 1.30)
    2026-12-07, later evening, 1st        1.38  1.42  1.45  1.36   12.3 / 8.9;  30.8 / 21.2
    2026-12-07, later evening, 2nd        1.45  1.30  1.23  1.52   12.3 / 8.5;  22.2 / 18.1
    2026-12-07, later evening, 3rd        1.41  1.31  1.53  1.16   11.2 / 8.0;  20.5 / 13.4
    2026-12-07, later evening, medians    1.41  1.31  1.45  1.36   (lowest 1.38, 1.30, 1.23, 1.16)
    2026-12-07, night, 1st                1.27  1.35  1.08  1.46   11.4 / 8.9;  25.8 / 23.9
    2026-12-07, night, 2nd                1.62  1.48  1.72  1.53   11.4 / 7.0;  27.9 / 16.3
    2026-12-07, night, 3rd                1.34  1.24  2.06  1.23   11.5 / 8.6;  27.9 / 13.5
    2026-12-07, night, medians            1.34  1.35  1.72  1.46   (lowest 1.27, 1.24, 1.08, 1.23)
    2026-12-06, late, medians (--repeat)  1.20  1.43  1.41  1.42

The evening runs of 2026-12-07 (one ``--repeat 3``, quiet) have the code of the afternoon's "after":
what bounds K=1 is in ``bench_model_call.py`` (with 10 ms replies the SDK adds 1.1 ms of wall and
1.3 ms of CPU to each model call beyond a bare POST, 10-11 ms a run; measured again that night
with a run's last request, streamed both ways as DBOS's steps do, 1.2-2.0 ms of wall and 1.4-1.9 of
CPU a call, 11-18 ms a run).
The later evening's have a worker that asks the store at each take whether the run's writer lost
its session and may live on (``agent/fleet/live_writers.py``: one more query a take).
The night's have the same code (one ``--repeat 3``, quiet, the machine slower than in the
evening): our K=1 held at 11.4-11.5 runs/s while DBOS's went 8.9, 7.0, 8.6, and the ratios with it.

In the afternoon of 2026-12-07, "before" is the code of the midday runs and "after" a
PostgreSQL worker that holds one session when idle and one more per run in flight (its runs
read through the session it looks and listens on; before, each run thread held a reading
session and a writer's of its own). The four before and the 1st-3rd after were alternated
(before, after, before, ...); the 4th-6th after are one ``--repeat 3`` of the merged code. Our
runs/s moved by less than the drift: K=1 10.95 before and 10.5 after (medians), K=2 19.2 and
18.6, while DBOS's K=2 rose from 11.9 to 13.0 over the same hour, which lowers the ratios after.
Alternated once more without DBOS (``resume`` alone, six of each): K=1 10.45 before and 10.55
after, K=2 19.85 and 19.45 runs/s (medians; all twelve of each K within 10.1-11.7 and
18.0-21.3). From the afternoon on, the server's
CPU counts its sessions that ended in the window (a worker now closes its kept sessions once
idle, just before the count), so it reads 11-17 ms a run where it read 7-11.

The midday runs of 2026-12-07 have workers that take pending runs oldest first (a run whose
worker died keeps its place in line): with one of two SIGKILLed, its two runs in flight went to
the back of the queue and ran last, each adding a run's length to the window. That row, 1.23-1.59
(median 1.31) in the morning, is 1.30-1.57 (median 1.48) in the six: the four first 1.47-1.57,
the last two, whose DBOS side ran faster, 1.38 and 1.30. In the 1st and 2nd each take still
read the run's log once more for the deaths guard (3 ms of CPU a run; the run index keeps the
count since). CPU a run in all, ours / DBOS's, in the 3rd to 6th: 52-72 / 70-105 ms.

The morning runs of 2026-12-07 are on a faster machine of the same kind (CPU a run in all, ours
/ DBOS's: 47-70 / 67-131 ms), with a view made once a step, not three times, and a loopback API
that looks up the reply a tool call came with instead of scanning every record. In the 3rd,
DBOS's crash phase timed out again; the loopback API listened with socketserver's backlog of 5,
which a hundred workflows connecting at once overflow (connections reset, SYNs resent after 1,
2, 4 s): it listens with 128 from the 5th on. The row with one worker SIGKILLed is K=2 for
half the runs, then K=1 for the rest, so its ratio follows K=1's: there a run's time is its 9
model calls (14-15 ms each from intent to result, 10 of them the reply's latency) and ~35 ms
of the worker's CPU, on one GIL with the other run.

The later runs of 2026-12-07 have tool calls that decode the environment only when it changed
(``bench_tool_call.py``) and a worker that reads a run's log once before its lease. In the 2nd,
DBOS's K=1 timed out making its crashed workflows ("DBOS failed"); in the 5th the host slowed
mid-measurement (every CPU figure rose by a third to a half, DBOS's K=4 fell to 8.4 runs/s).
Over the day the machine slowed (our K=1 11.8 -> 9.7 runs/s), and DBOS's runs slowed more than
ours: the ratios rose with it.

The runs of 2026-12-07 are on another machine of the same kind, slower (our K=1 9.3-10.2
runs/s against 10.4-10.9), with a worker that no longer rebuilds a view for every piece of
streamed text (no observer draws it). In the last two, DBOS's workflows send the requests ours
send (before, one user message and a JSON reply): the loopback API, on the same two cores,
spent 15-23 ms of CPU a run on ours and 8-15 on DBOS's, a cost of the fake that the CPU-bound
rows charged to us; now 16-21 against 18-28. CPU a run in all, ours / DBOS's: K=1 81 / 113 and
95 / 120, K=2 87 / 102 and 100 / 144, K=4 87 / 132 and 100 / 140, K=2 killed 72 / 114 and
108 / 161 (the machine slowed by a tenth to a quarter between the two).

The late runs have migration 7 of the PostgreSQL store (an append leaves the run's
settings, ~3 KB of jsonb in their own column, as they were: rewriting them was half of each
append's time on the server) and replies typed by the SDK's validation: PostgreSQL's CPU a
run fell from 13-19 to 7-13 ms, and the rows bound by CPU and contention (K=2, K=4, one killed)
rose from 1.12-1.21 to 1.41-1.43. K=1 is where it was: bound by a run's wall time (above).

The night runs have the loopback API's CPU a request halved (1.37-1.40 ms to 0.6-0.77 of
a late turn's request: its prompt split once, its ids drawn in one call, a reply's events in
one write), which both sides' requests pass through; in the three measurements the machine
slowed by a third from the first to the last (our K=4 28.8, 22.7, 16.3 runs/s; DBOS's 25.8,
17.9, 17.3). CPU a run in all, ours / DBOS's, in the first: K=1 62 / 72, K=2 67 / 72, K=4 64 / 70.
That saving helps DBOS at least as much as us. Two pairs of whole runs, the fake before and
after, alternated (old, new, new, old): our K=4 21.9 and 21.9, then 25.0 and 21.0 runs/s;
DBOS's 16.6 and 19.4, then 25.2 and 17.7; the ratios with the old fake 1.31 1.23 1.32 1.27 and
1.44 1.17 1.19 1.36, with the new 1.19 1.22 1.13 1.08 and 1.25 1.18 0.99 1.21. The fake's cost
weighed more on DBOS's lighter runs (it drew 44 id characters a reply from SystemRandom for
both); it stays out, as what is measured is the engines, not the fake.

The middle and end runs have workers that build their SDK client and read the price table
before they say they are ready, and count only the benchmark's own PostgreSQL server (before,
every process named postgres on the machine). CPU a run in all, ours / DBOS's, at the end: K=1
75 / 109, K=2 91 / 115, K=4 83 / 90, K=2 killed 66 / 85.

CPU a run in all (ms; workers + this process + PostgreSQL), ours against DBOS's, in the second:
K=1 81 / 104, K=2 94 / 98, K=4 79 / 76, K=2 killed 64 / 84. Our workers spend less than DBOS's
executors (41-56 ms against 53-71), this process more (15-23 against 8-15: our requests carry
the conversation and stream; DBOS's send one message and read one JSON body), PostgreSQL a
little less (8-16 against 11-18). With K=4 both keep the two cores busy, so which side leads
there follows the machine's speed of the moment; 1.5x there means a run in two thirds of
DBOS's CPU. In the thirteen runs before these (over four days, on two machines of this kind) the ratios
ranged 1.14-1.41 at K=1, 1.02-1.39 at K=2, 0.89-1.50 at K=4 and 1.13-1.42 with one killed;
before the run index and the indexed claim (2026-12-01) they were 0.19-0.40.

What made the difference, found by profiling one worker (cProfile, py-spy):

* an index row was encoded with ``dataclasses.asdict``, which deep-copies the settings (every
  tool's schema) on each append: a quarter of the worker's CPU; now a row goes without its
  settings once they are stored (``core.index.rows.slim_since``);
* each run built its own SDK client (an SSL context, ~25 ms of CPU, and a new connection pool)
  and looked its price up in genai-prices' whole table on every reply; and anthropic 2.17
  traces by default, so the client was copied per call to name the run in spans that no
  tracer provider records: it is copied only when one does;
* each run opened the store three times (connect, schema check) and read its log four times;
* the SDK's import (over a second) happened inside the first run, after its lease was taken,
  so it counted in the window and held a lease; a worker now imports it before it starts;
  so, later, were the SDK client's build and genai-prices' table (0.15-0.18 s of CPU a
  worker, in its first two runs: 1.5-7 ms a run of 100 at K=1-4); both now come before the
  banner;
* under durability ``full`` a PostgreSQL writer sent ``SET synchronous_commit`` twice per
  model step (an unsynced intent, then a synced result); the append now sets it for its own
  transaction;
* the SDK's stream helper typed every event and then the message (a fifth of the worker's
  CPU); a streamed reply is now read from its raw events (``agent.models.stream``), to the end
  of its body (read only to ``message_stop``, each response closed unfinished and every call
  opened a new connection): a resumed run costs the worker 26-31 ms of CPU, not 35-40
  (``bench_model_call.py``).

The 1.5x of issue 25 is not reached, and the gap is no longer in finding and claiming runs
(a claim is one indexed query, an idle worker wakes on NOTIFY): it is in the steps, and at
K=4 in the two cores. Where latency is the limit (K=1, 2) a run's time is its 9 model calls
(14-17 ms each from intent to result, of which 10 ms the reply's latency; ~130-150 ms a run)
and ~18 ms of everything else, with the other thread of the process sharing the GIL; DBOS's steps take
longer (p50 11-13 ms), and nb_durable leads by a fifth to two fifths. With K=4 both cores are
busy through the window (vmstat: 8-10% idle), about 68 ms of CPU a run across the workers
(26-31 ms a run alone, more under contention), this process's loopback API (15-18 ms: our
requests carry the growing conversation and stream; DBOS's send one message and read one JSON
body) and PostgreSQL (11-15 ms for ~39 statements). 1.5x of DBOS there (~37 runs/s) means under
48 ms a run in all, which leaves the workers under ~22 ms a run with the server and the
database as they are, of which the SDK's 9 calls take ~10.

At K=1 the bound is measured (``bench_model_call.py``): with 10 ms replies a run alone takes
143-149 ms, so one worker taking two at a time cannot pass 13.4-14.0 runs/s, while 1.5x of
DBOS's K=1 (9.0-9.5 runs/s) is 13.5-14.3: only two runs that slow each other by nothing would reach it.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import contextlib
import itertools

from benchmarks.dbos_recovery import ENV_PYTHON, SETUP, dbos_python, recover
from benchmarks.proc_cpu import cpu_of, server_cpu
from nb_durable.agent.models.anthropic import AnthropicModel
from nb_durable.agent.run.crash import CrashAt
from nb_durable.agent.run.hooks import RunHooks
from nb_durable.agent.run.loop import run_agent
from nb_durable.core.events import StepCompleted, StepStarted
from nb_durable.core.runs import list_runs, read_runs
from nb_durable.core.whole_runs.transfer import copy_runs
from nb_durable.errors import SimulatedCrash
from tests.conftest import subprocess_env
from tests.fakes import Action, Delay, MessagesAPIServer, RecordedRequest, Scenario, reply, tool_use
from tests.pg import postgres_url, server

TURNS = 10  # model calls per run; each but the last asks for one list_dir: 19 steps (and a worker's mark)
LATENCY = 0.01  # seconds before each model reply, by default


class Turns(Scenario):
    def __init__(self, latency: float) -> None:
        self.latency = latency

    def action(self, request: RecordedRequest) -> Action:
        turn = request.turn or 0
        if turn + 1 < TURNS:
            answer = reply(f"Looking, turn {turn}.", tool_use("list_dir", {"path": "."}, id=f"toolu_{turn}"))
        else:
            answer = reply("Done.")
        return Delay(self.latency, answer)


def crashed_runs(store: str, workspace: Path, n: int) -> None:
    """``n`` runs, each stopped as a killed process would leave it as its third step starts."""

    def one(i: int) -> None:
        with contextlib.suppress(SimulatedCrash):
            run_agent(
                f"bench run {i}: look around", run_id=f"b{i:03d}", client=AnthropicModel(timeout=30), model="claude-test-1",
                store=store, workspace=workspace, max_turns=TURNS + 2, max_tokens=256, hooks=RunHooks(before_step=CrashAt(3)),
            )

    for start in range(0, n, 8):
        threads = [threading.Thread(target=one, args=(i,)) for i in range(start, min(n, start + 8))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()


def sent_with(body: dict[str, Any], folder: Path) -> Path:
    """A file of what a run's model request carries besides its messages (model, system, tools,
    thinking, cache_control, stream), for DBOS's workflows to send the same requests."""
    path = folder / "request.json"
    path.write_text(json.dumps({k: v for k, v in body.items() if k != "messages"}))
    return path


def worker_command(store: str) -> list[str]:
    return [sys.executable, "-m", "nb_durable.cli", "worker", "--store", store, "--concurrency", "2", "--poll", "0.2"]


def resume(source: str, env: dict[str, str], workers: int, n: int, kill_one: bool) -> dict[str, Any]:
    """K workers on an empty schema; once each says it is ready (the SDK imported), the crashed
    runs of ``source`` are copied in and the workers resume them; their figures."""
    store = postgres_url()
    procs = [subprocess.Popen(worker_command(store), env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True) for _ in range(workers)]
    killed = False
    try:
        for p in procs:
            said = p.stdout.readline() if p.stdout is not None else ""
            assert "at a time" in said, f"a worker did not start: {said!r}"
        # As DBOS's executors, launched before they are told to recover: start-up is not counted.
        ready = cpu_of(p.pid for p in procs)
        own, database = time.process_time(), server_cpu(server().data)
        started, mark = time.monotonic(), time.time()
        copy_runs(source, store)
        while True:
            done = sum(s.status == "completed" for s in list_runs(store))
            if kill_one and not killed and done >= n // 2:
                ready -= cpu_of([procs[0].pid])  # what it spent counts; it is gone at the end
                procs[0].send_signal(signal.SIGKILL)
                procs[0].wait()
                killed = True
            if done == n:
                break
            time.sleep(0.5)  # a tighter poll would take the workers' CPU
        wall = time.monotonic() - started
        # Before the workers stop, while their database sessions live (a session's CPU goes with it).
        own, database = time.process_time() - own, server_cpu(server().data) - database
        spent = cpu_of(p.pid for p in procs if p.poll() is None) - ready
    finally:
        for p in procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in procs:
            p.communicate(timeout=60)
    first, last, gaps, steps, calls = float("inf"), 0.0, [], 0, []
    for record in read_runs(store):
        steps += sum(isinstance(e, StepCompleted) for e in record.events)
        resumed = [e for e in record.events if e.ts >= mark]
        asked = {e.step: e.ts for e in resumed if isinstance(e, StepStarted) and e.step.startswith("model:")}
        calls += [e.ts - asked[e.step] for e in resumed if isinstance(e, StepCompleted) and e.step in asked]
        first = min(first, resumed[0].ts)
        last = max(last, resumed[-1].ts)
        stamps = [e.ts for e in resumed if isinstance(e, StepCompleted)]
        gaps += [b - a for a, b in itertools.pairwise(stamps)]
    ours = figures(workers, n, {"killed": killed, "window": last - first, "wall": wall, "gaps": gaps, "steps": steps})
    ours.update(call_ms=1000 * statistics.median(calls), own_cpu_ms=1000 * own / n, database_cpu_ms=1000 * database / n, workers_cpu_ms=1000 * spent / n)
    return ours


def figures(workers: int, n: int, raw: dict[str, Any]) -> dict[str, Any]:
    """One recovery's figures, nb_durable's or DBOS's alike, from its window, wall time, the
    gaps between a run's consecutive steps and the steps recorded."""
    gaps = sorted(raw["gaps"])
    return {
        "workers": workers,
        "killed": raw["killed"],
        "runs_per_s": n / raw["window"],
        "window": raw["window"],
        "wall": raw["wall"],
        "p50_ms": 1000 * statistics.median(gaps),
        "p99_ms": 1000 * gaps[int(0.99 * (len(gaps) - 1))],
        "steps_per_run": raw["steps"] / n,
    }


CONFIGS = ((1, False), (2, False), (4, False), (2, True))  # worker processes, one SIGKILLed halfway


def _config(r: dict[str, Any]) -> str:
    return f"{r['workers']} process(es)" + (" (one SIGKILLed)" if r["killed"] else "")


def _cpu(r: dict[str, Any], workers: str) -> str:
    parts = (r[f"{workers}_cpu_ms"], r["own_cpu_ms"], r["database_cpu_ms"])
    return f"{parts[0]:5.1f} + {parts[1]:5.1f} + {parts[2]:5.1f} = {sum(parts):5.1f}"


def _row(who: str, r: dict[str, Any]) -> str:
    name = f"{who} {r['workers']}" + (" (one SIGKILLed)" if r["killed"] else "")
    return (
        f"{name:<40} {r['runs_per_s']:>8.1f} {r['window']:>9.2f} {r['wall']:>7.2f} {r['p50_ms']:>12.1f} "
        f"{r['p99_ms']:>12.1f} {r['steps_per_run']:>6.1f}"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--latency", type=float, default=LATENCY, help="seconds before each model reply")
    parser.add_argument(
        "--repeat", type=int, default=1, metavar="N",
        help="measure every pair N times and end with each row's median ratio and its range (the machine drifts)",
    )
    parser.add_argument(
        "--dbos-python", metavar="PYTHON",
        help=f"the Python of a venv with dbos (default: ${ENV_PYTHON}, else .dbos-venv/bin/python; make it with: {SETUP})",
    )
    args = parser.parse_args()
    import tempfile

    dbos, dbos_version = dbos_python(args.dbos_python)
    ratios: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory() as tmp, MessagesAPIServer(Turns(args.latency)) as api:
        workspace = Path(tmp) / "workspace"
        workspace.mkdir()
        os.environ["ANTHROPIC_BASE_URL"] = api.url
        os.environ["ANTHROPIC_API_KEY"] = "sk-bench"
        env = subprocess_env(ANTHROPIC_BASE_URL=api.url, ANTHROPIC_API_KEY="sk-bench")
        for repeat in range(args.repeat):
            results: list[tuple[dict[str, Any], dict[str, Any] | str]] = []
            for workers, kill_one in CONFIGS:
                store = postgres_url()
                crashed_runs(store, workspace, args.runs)
                made = [s.status for s in list_runs(store)]
                # A run that failed to start (its thread's traceback above) would keep the wait for all n going for ever.
                assert made == ["interrupted"] * args.runs, f"{len(made)} of {args.runs} runs were made and stopped as a crash leaves them"
                ours = resume(store, env, workers, args.runs, kill_one)
                theirs: dict[str, Any] | str = f"DBOS was not available ({dbos_version})"
                if dbos is not None:
                    # Right after ours, on the same server: a shared machine drifts less within a pair.
                    try:
                        fixed = sent_with(api.requests_to("messages")[0].body, Path(tmp))
                        raw = recover(dbos, server().fresh_database(), api.url, fixed, args.runs, workers, kill_one, workspace, Path(tmp))
                        theirs = figures(workers, args.runs, raw)
                        theirs.update({f"{k}_cpu_ms": 1000 * v / args.runs for k, v in raw["cpu"].items()})
                    except Exception as e:  # a comparison, not the subject: say why, keep ours
                        theirs = f"DBOS failed: {type(e).__name__}: {e}"
                results.append((ours, theirs))
            if args.repeat > 1:
                print(f"\n== measurement {repeat + 1} of {args.repeat}")
            _report(args, dbos_version, results)
            for ours, theirs in results:
                if isinstance(theirs, dict):
                    ratios.setdefault(_config(ours), []).append(ours["runs_per_s"] / theirs["runs_per_s"])
    if args.repeat > 1 and ratios:
        print(f"\nruns/s of nb_durable against DBOS over {args.repeat} measurements: median (lowest-highest)")
        for name, found in ratios.items():
            print(f"  {name:<30} x{statistics.median(found):.2f} ({min(found):.2f}-{max(found):.2f})")
    return 0


def _report(args: argparse.Namespace, dbos_version: str, results: list[tuple[dict[str, Any], dict[str, Any] | str]]) -> None:
    """One measurement's tables: runs/s and steps, where the time and CPU go, the ratios."""
    print(f"{args.runs} runs of {2 * TURNS - 1} steps ({TURNS} model calls, {TURNS - 1} list_dir), "
          f"{args.latency * 1000:.0f} ms per model reply, one PostgreSQL server, {os.cpu_count()} cores; "
          "each worker or DBOS executor: 2 runs at once")
    print(f"{'':<40} {'runs/s':>8} {'window s':>9} {'wall s':>7} {'step p50 ms':>12} {'step p99 ms':>12} {'steps':>6}")
    for ours, theirs in results:
        print(_row("nb_durable workers", ours))
        print(_row(f"DBOS {dbos_version} executors", theirs) if isinstance(theirs, dict) else f"  {theirs}")
    print("\nWhere a run's time and CPU go (from the runs' own timestamps, and /proc): nb_durable's model step from")
    print("intent to result (p50), then the CPU a run (ms) of the workers or executors (their start-up left out),")
    print("of this process (the loopback API, the progress poll) and of PostgreSQL, and in all:")
    for ours, theirs in results:
        name = _config(ours)
        print(f"  {name:<30} model step {ours['call_ms']:.1f} ms; nb_durable {_cpu(ours, 'workers')}")
        if isinstance(theirs, dict):
            print(f"  {'':<30} {'':<18} DBOS       {_cpu(theirs, 'executors')}")
    compared = [(o, t) for o, t in results if isinstance(t, dict)]
    if not compared:
        print(f"\nno DBOS figures: to compare, make its venv ({SETUP}) or pass --dbos-python, then run again")
        return
    print("\nnb_durable against DBOS, each pair measured back to back (above 1: nb_durable faster):")
    for ours, theirs in compared:
        name = _config(ours)
        print(
            f"  {name:<30} runs/s x{ours['runs_per_s'] / theirs['runs_per_s']:.2f}   "
            f"step p50 x{theirs['p50_ms'] / ours['p50_ms']:.2f}   step p99 x{theirs['p99_ms'] / ours['p99_ms']:.2f}"
        )


if __name__ == "__main__":
    sys.exit(main())
