"""The run index: a small summary per run, so listing and claiming runs never reads their logs.

The log is the truth and the index a view of it: ``row_of(history)`` is the one rule that
turns a run's log into its ``IndexRow`` (status as recorded, whether a worker may take it,
priority, tags, batch, parent and whether the run is its child, times, step counts, and what
the ``Figures`` counter adds up: tokens and dollars). The run's one write path (``core.writing.writer``) keeps the row current, handing
it to the store with every append, and transactional stores write both in one transaction
(SQLite, PostgreSQL, memory); the JSONL store keeps a sidecar cache keyed by each log's size
and modification time, refreshed from the logs whenever they differ, never believed over them.

``index.check`` rebuilds every row from the logs, says where the stored index differs and
repairs it: the check the contract suite and ``nb-durable check-index`` run.

Who holds a run's lease is not in the row (the lease is its own truth): a reader joins
``Store.held()`` in, so a run is ``running`` exactly while its lease is held, or ``waiting``
while its holder has marked the lease with a question it asks a person (``core.holders``).

Figures: core knows nothing of models or prices, so the agent registers the counter that
says what a step's result and a run's end add (``figures``: ``set_figures``); each figure is a
sum of numbers, added in log order, so the incremental row and a rebuilt one agree exactly.

Rules: a row is stamped with the rule that made it (``current_rule``: ``ROW_RULE`` and the
counter's ``rule``). A row of another rule, an older nb_durable's, describes its log as that
version saw it, so nothing believes it: a writer opening the run counts its figures again, a
listing makes the rows it shows from their logs, the JSONL sidecar makes it again, and
``check-index --repair`` rewrites it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any, Protocol

from ..events import ATTEMPT_FAILED, RUN_FINISHED, STEP_COMPLETED, AttemptFailed
from ..history import History
from ..status import Status
from ..steps import QUEUED, RunStatus
from .figures import NO_COUNTER, add_figures, counted_of, counts_figures, figures
from .listing import RunFilter

__all__ = [
    "BY_WORKER",
    "CLAIM_SECONDS",
    "GOING",
    "PRIORITIES",
    "ROW_RULE",
    "STOPPED_BY_WORKER",
    "IndexRow",
    "IndexedStore",
    "RunFilter",
    "child_parent",
    "claim_order",
    "current_rule",
    "index_of",
    "names",
    "pending_of",
    "priority_of",
    "row_of",
    "slim_since",
]

BY_WORKER = "worker "
"""How a decision's ``by`` names a worker that resumed the run: ``worker host:pid``."""

STOPPED_BY_WORKER = "stopped by worker"
"""How a run stopped by a worker's graceful stop begins its recorded error; workers take such runs."""


GOING: tuple[str, ...] = tuple(s.value for s in Status if s.going)
"""The statuses a held lease gives an unfinished run, never recorded: running, waiting (``core.holders``)."""


PRIORITIES = range(-(2**31), 2**31)
"""The priorities a run may have: what every store's index column holds (PostgreSQL's
``integer``). A log from elsewhere with one outside is indexed at the nearest end."""


CLAIM_SECONDS = 3.0
"""How long a claimed run is kept from other workers' claims: the time to take its lease
(milliseconds, or the start of its MCP servers). A worker killed between its claim and its
lease holds the run up this long; a claim that runs out first costs another worker a look."""


ROW_RULE = 7
"""The version of ``row_of``'s rule: raised whenever it would make another row of the same log
(2: a fork's figures count only its own calls; 3: rows are stamped with their rule; 4: rows say
whether their parent started them as its child, ``IndexRow.child``; 5: a pending run's place in
line is its first event, not its last, ``IndexRow.queued_at``; 6: rows hold the decision their
log leaves an unfinished step at, ``IndexRow.open_decision``; 7: and the step starts it ends
with, ``IndexRow.unfinished_starts``)."""


def current_rule() -> str:
    """The rule a row made now is stamped with: ``ROW_RULE`` and the counter's."""
    return f"{ROW_RULE}.{figures().rule}"


@dataclass(frozen=True, slots=True)
class IndexRow:
    """One run's summary as the index keeps it: everything derived from its log alone."""

    run_id: str
    lines: int
    """How many events of the log the row reflects."""
    status: RunStatus
    """The status the log gives with no writer alive (a reader says ``running`` while the lease is held)."""
    ended: bool
    """The log ends with ``run_finished``."""
    pending: bool
    """A worker may take it once nobody holds its lease: queued, its writer died, or a worker stopped it."""
    steps: int
    completed_steps: int
    started_at: float | None
    updated_at: float | None
    queued_at: float | None
    """Its place in line for a worker, if ``pending``: when it was queued or started (its first
    event), so a run whose worker died is taken before the runs queued after it, not behind them."""
    priority: int
    tags: tuple[str, ...]
    batch: str | None
    parent: str | None
    """The run this one came from: the run it is a child of, else its ``parent`` setting, else the
    run it was forked from (``parent_of``); ``child`` says which."""
    resumed_by: str | None
    settings: Mapping[str, Any] = field(default_factory=dict)
    output: Any = None
    error: str | None = None
    figures: Mapping[str, float] = field(default_factory=dict)
    child: bool = False
    """Whether ``parent`` started this run as its child (``child_parent``), not a run it was forked
    from or names; False in rows of rule 3 and before, which no reader believes (``current``)."""
    open_decision: str | None = None
    """The latest decision of the step the log leaves without a result (``History.open_decision``),
    so a listing can say what a run no writer holds was left waiting on (a Message Batch)."""
    unfinished_starts: int = 0
    """The step starts its log ends with, nothing recorded after them (``History.starts_since_result``):
    processes that died in a step, which a worker counts before it resumes the run."""
    rule: str = ""
    """The rule that made the row (``current_rule``); empty in rows written before rows were stamped."""

    @property
    def current(self) -> bool:
        """Whether the row was made by the rule in use, so it may be believed."""
        return self.rule == current_rule() or (not counts_figures() and self.rule.split(".")[0] == str(ROW_RULE))

    @property
    def child_of(self) -> str | None:
        """The run this one is a child of (billed in its tree, listed under it), if it is a child."""
        return self.parent if self.child else None

    @property
    def uncounted(self) -> bool:
        """Whether a process with no counter made the row by this ``ROW_RULE``: right but for
        its figures, which it could not count, so one that counts checks them against the log."""
        return self.rule == f"{ROW_RULE}.{NO_COUNTER}"

    def to_json(self) -> dict[str, Any]:
        """The row as JSON values (for a store's data column or sidecar file)."""
        # Not dataclasses.asdict: it deep-copies the settings (every tool's schema) on each
        # append, a quarter of a worker's CPU; the values are JSON already and never changed.
        out = {name: getattr(self, name) for name in _FIELDS}
        out["tags"] = list(self.tags)
        out["settings"] = dict(self.settings)
        out["figures"] = dict(self.figures)
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> IndexRow:
        """A row ``to_json`` wrote."""
        return cls(**{**data, "tags": tuple(data.get("tags") or ())})

    def encoded(self, *, settings: bool = True) -> str:
        """The row as one JSON text (stable key order). Without ``settings``, the text leaves
        them out, for a store to keep those it wrote with the run's row before (``slim_since``)."""
        data = self.to_json()
        if not settings:
            del data["settings"]
        return json.dumps(data, sort_keys=True, separators=(",", ":"))


def slim_since(row: IndexRow, sent: Mapping[str, Any] | None) -> bool:
    """Whether a writer may send ``row`` without its settings, having sent ``sent`` with the
    run's row before: the settings (every tool's schema, most of a row's bytes) change only
    when a session starts, yet the row is rewritten with every append."""
    return sent is not None and row.settings == sent


_FIELDS = tuple(f.name for f in fields(IndexRow))


def pending_of(status: RunStatus, ended: bool, error: str | None, settings: Mapping[str, Any]) -> bool:
    """Whether a worker may take the run once nobody holds its lease (``IndexRow.pending``)."""
    if "task" not in settings:
        return False  # not an agent run: no worker can rebuild it
    if status == QUEUED:
        return True
    if not ended:
        return status in ("interrupted", "in_doubt")
    return status == "interrupted" and (error or "").startswith(STOPPED_BY_WORKER)


def claim_order(priority: int, queued_at: float | None) -> tuple[int, float]:
    """The order workers take runs in: the highest priority first, then the first in line, queued
    or started earliest (the SQL stores say it in their claim's ``ORDER BY priority DESC, queued_at``)."""
    return -priority, queued_at or 0.0


def child_parent(history: History) -> str | None:
    """The run this one is a child of: the run whose step started it, as its ``run_started``
    names it (``core.whole_runs.children``). The one rule of who is whose child: a fork (its
    ``forked_from``), a copy (the same log) and a run naming a ``parent`` setting are no child of it."""
    started = history.started
    link = started.parent if started is not None else None
    run = link.get("run_id") if link is not None else None
    return run if isinstance(run, str) and run else None


def parent_of(history: History, settings: Mapping[str, Any] | None = None) -> str | None:
    """The run this one came from: the run it is a child of (``child_parent``), else its
    ``parent`` setting, else the run it was forked from."""
    child = child_parent(history)
    if child is not None:
        return child
    settings = history.settings if settings is None else settings
    parent = settings.get("parent")
    if isinstance(parent, str) and parent:
        return parent
    forked = history.started.forked_from if history.started else None
    run = (forked or {}).get("run_id")
    return run if isinstance(run, str) else None


def row_of(history: History, figures_so_far: Mapping[str, float] | None = None, resumed_by: str | None = None, *, counted: bool = False) -> IndexRow:
    """The index row of a run's log. ``counted`` says ``figures_so_far`` and ``resumed_by``
    already sum the whole log (the writer keeps them as it appends); else they are counted here."""
    settings = history.settings
    if not counted:
        figures_so_far, resumed_by = count_log(history)
    status = history.status(writer_alive=False)
    finished = history.finished
    ended = finished is not None
    error = finished.error if finished else None
    pending = pending_of(status, ended, error, settings)
    tags = settings.get("tags") or ()
    batch = settings.get("batch")
    return IndexRow(
        run_id=history.run_id,
        lines=len(history.lines),
        status=status,
        ended=ended,
        pending=pending,
        steps=history.step_count,
        completed_steps=history.completed_count(),
        started_at=history.first_ts,
        updated_at=history.last_ts,
        queued_at=history.first_ts if pending else None,
        priority=priority_of(settings),
        tags=tuple(str(t) for t in tags) if isinstance(tags, (list, tuple)) else (),
        batch=batch if isinstance(batch, str) else None,
        parent=parent_of(history, settings),
        resumed_by=resumed_by,
        settings=settings,
        output=finished.output if finished else None,
        error=error,
        figures=dict(figures_so_far or {}),
        child=child_parent(history) is not None,
        open_decision=history.open_decision(),
        unfinished_starts=history.starts_since_result()[0],
        rule=current_rule(),
    )


def priority_of(settings: Mapping[str, Any]) -> int:
    """A run's priority (its ``priority`` setting) as its row holds it: a whole number within ``PRIORITIES``."""
    try:
        whole = int(settings.get("priority") or 0)
    except (TypeError, ValueError, OverflowError):
        return 0
    return min(max(whole, PRIORITIES.start), PRIORITIES.stop - 1)


def resumer_of(by: str | None) -> str | None:
    """The worker a decision's ``by`` names, if a worker made it."""
    return by[len(BY_WORKER) :] if by and by.startswith(BY_WORKER) else None


def count_log(history: History) -> tuple[dict[str, float], str | None]:
    """A whole log's figures (in log order) and the worker that last resumed it. A fork's
    copied steps are left out, with their failed attempts: the run they were copied from paid
    for them, and counts them (the rule of ``agent.display.views`` too)."""
    counter = figures()
    settings = history.settings
    found: list[tuple[int, str, Any]] = []
    started = history.started
    copied_steps = {s for s, seq in history.completions() if started is not None and started.copied_result(history.position_of(s) or 0, seq)}
    for step_id, seq in history.completions():
        if step_id not in copied_steps and counter.wants(STEP_COMPLETED, step_id):
            found.append((seq, STEP_COMPLETED, seq))
    resumed_by = None
    for seq in range(len(history.lines)):
        event = history.cached_event(seq)
        if event is None:
            continue
        if event.kind == RUN_FINISHED and counter.wants(RUN_FINISHED, None):
            found.append((seq, RUN_FINISHED, counted_of(event)))
        elif isinstance(event, AttemptFailed) and event.usage is not None and event.step not in copied_steps and counter.wants(ATTEMPT_FAILED, event.step):
            found.append((seq, ATTEMPT_FAILED, counted_of(event)))
        worker = resumer_of(getattr(event, "by", None)) if event.kind == "decision" else None
        resumed_by = worker or resumed_by
    total: dict[str, float] = {}
    for _, kind, value in sorted(found, key=lambda f: f[0]):
        payload = history.result_at(value) if kind == STEP_COMPLETED else value
        total = add_figures(total, counter.count(settings, kind, payload))
    return total, resumed_by


def names(given: str | Iterable[str]) -> tuple[str, ...]:
    """Run ids, statuses or tags given as one or many: one str is one name, not its letters."""
    return (given,) if isinstance(given, str) else tuple(given)


class IndexedStore(Protocol):
    """A store that keeps the run index (every built-in store does). A class attribute
    ``index_written = False`` says its writers leave the index alone (readers make it: JSONL);
    ``keeps_index = False`` that this one has none (a database an older nb_durable made)."""

    def index_rows(self, run_ids: Sequence[str] | None = None) -> list[IndexRow]:
        """The stored rows (of those runs), unordered; a run with no row has no log yet."""
        ...

    def held(self) -> dict[str, dict[str, Any]]:
        """Every run whose lease is held now, with its holder (pid, host, since; ``asking`` while it asks a person)."""
        ...

    def column_drift(self) -> dict[str, dict[str, tuple[Any, Any]]]:
        """Each run whose columns (those a listing or a claim filters by) say other than its
        row, with each such column's (stored, the row's) values; none where there are no columns."""
        ...


def index_of(store: object) -> IndexedStore | None:
    """The store as an ``IndexedStore``, or None if it keeps no index (read its logs then)."""
    if getattr(store, "keeps_index", True) and callable(getattr(store, "index_rows", None)) and callable(getattr(store, "held", None)):
        return store  # type: ignore[return-value]
    return None
