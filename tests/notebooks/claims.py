"""The facts each tutorial's prose states, checked against what its cells printed.

``CLAIMS`` maps a notebook's number to a check of its executed copy, so the text of a
notebook cannot drift from what its code does (``test_notebooks.test_what_the_prose_claims``).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import nbformat

from nb_durable.agent.fleet.decisions import who
from tests.notebooks import cell_text, errors


class Cells:
    """Find an executed notebook's code cells by a piece of their source."""

    def __init__(self, nb: nbformat.NotebookNode) -> None:
        self.code = [c for c in nb.cells if c.cell_type == "code"]
        self.prose = "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")

    def all(self, snippet: str) -> list[Any]:
        found = [c for c in self.code if snippet in c.source]
        assert found, f"no code cell contains {snippet!r}"
        return found

    def one(self, snippet: str) -> Any:
        [cell] = self.all(snippet)
        return cell

    def text(self, snippet: str) -> str:
        return cell_text(self.one(snippet))


def numbers(line: str) -> list[int]:
    return [int(n.replace(",", "")) for n in re.findall(r"\d[\d,]*", line)]


def table(text: str) -> dict[str, list[int]]:
    """The rows of notebook 1's printed table: label -> calls, tokens, reminders."""
    rows = {}
    for line in text.splitlines():
        label = line[:22].strip()
        if label and numbers(line[22:]):
            rows[label] = numbers(line[22:])
    return rows


def claims_01(cells: Cells) -> None:
    bare = table(cells.text("def table(rows"))
    needed, first, restart, total = (bare[k] for k in ("the task needs", "first run (died)", "restart", "in all"))
    assert restart == needed, "the bare restart does the whole task again"
    assert first[0] > 0 and first[2] > 0
    assert total == [a + b for a, b in zip(first, restart, strict=True)]
    outbox = cells.text("print(bare_agent(SimulatedModel(), TASK))\ntotal").splitlines()
    assert outbox.count("reminder to ada") == 2, "the bare restart sends a second reminder"
    durable_cell = cells.one('with EventLog("reminders", root=HERE / "runs") as log:\n    print(durable_agent')
    durable = table(cell_text(durable_cell))
    assert durable["the task needs"] == needed
    assert durable["restart"][2] == 1, "the durable restart sends only the missing reminder"
    assert durable["in all"][2] == needed[2], "each customer got one reminder"
    assert needed[0] < durable["in all"][0] < bare["in all"][0], "only the call in flight is paid twice"
    assert durable["in all"][0] == needed[0] + 1
    sent = [line for line in cell_text(durable_cell).splitlines() if line.startswith("reminder to")]
    assert len(sent) == len(set(sent)) == needed[2]


def claims_02(cells: Cells) -> None:
    checked = [line for line in cells.text("zlib.crc32(body)").split("\n") if line.strip()]
    assert checked, "the crc32 cell printed no lines to compare"
    for line in checked:
        computed, stored = line.split()
        assert computed == stored
    assert "executed: {}" in cells.text('print("lines in the log:"')
    crashed = cells.text("pipeline(log, die_at=4)")
    assert "killed:" in crashed and '"step":"square:3"' in crashed and "square:4" not in crashed
    assert "executed: {'step 4': 1, 'step 5': 1}" in cell_text(cells.all("print(pipeline(log))")[0])
    torn = cells.all("print(pipeline(log))")[1]
    assert "TornLineWarning" in cell_text(torn)
    assert "dropped a torn last line (line 6 of " in cell_text(torn), "the warning names the line it dropped"
    assert "executed: {'step 5': 1}" in cell_text(torn)
    corrupted = cells.text("except LogCorruptedError as e:")
    assert "LogCorruptedError:" in corrupted and "line: 4 whole steps before it: 2" in corrupted, corrupted
    # The text and its exercise name the line the cell damages.
    assert "Change one character in the fourth line" in cells.prose and "instead of the fourth" in cells.prose
    saved = cells.text('fork("squares", "squares-saved"')  # the two whole steps replayed, the rest live
    assert re.search(r"replayed\s+square:1\s+1\n\s+replayed\s+square:2\s+4\n\s+live\s+square:3\s+9", saved), saved
    assert "[1, 4, 9, 16, 25]" in saved and "executed: {'step 3': 1, 'step 4': 1, 'step 5': 1}" in saved, saved
    assert all("DivergenceError:" in cell_text(c) for c in cells.all("except DivergenceError as e:"))
    rates = cells.text("for attempt in")
    assert "second [0.92, 0.79] executed: {}" in rates and '"kind":"run_finished"' in rates


def own_story(cell: Any) -> list[str]:
    """The text/plain of the one timeline a cell showed, by lines (as saved: the last update)."""
    [shown] = [out for out in cell.outputs if out["output_type"] == "display_data"]
    return str(shown["data"]["text/plain"]).splitlines()


def claims_03(cells: Cells) -> None:
    crash = cells.one("--crash-at 6")
    assert errors(crash) == ["SimulatedCrash"]
    # Each cell shows its own session: the crash its partial timeline (and one line of what
    # came later), the resume what it replayed and ran, the replay nothing live.
    crashed = own_story(crash)
    assert crashed[0].startswith("run fix-tests: crashed · ") and crashed[1] == "resumed in a later cell: completed there"
    assert "Done. The tests pass" not in "\n".join(crashed)
    # The prose: the timeline's header and %agent_runs both count six steps, the one cut off included.
    assert crashed[0].startswith("run fix-tests: crashed · 6 steps (0 replayed, 5 live, 1 cut off)"), crashed[0]
    listed = cell_text(cells.all("%agent_runs")[0]).splitlines()
    assert listed[-1].split()[:3] == ["fix-tests", "interrupted", "6"], listed
    assert "tokens paid" in listed[1] and "tokens saved" in listed[1], "the columns say they count tokens, not dollars"
    assert "Its step count, six, takes in the step that was in flight" in cells.prose
    assert "as the header of the timeline above does" in cells.prose
    assert own_story(cells.one("%agent_resume fix-tests -o resumed"))[0].startswith("run fix-tests: completed · 12 steps (5 replayed, 7 live)")
    assert own_story(cells.one("%%agent --run fix-tests -o again"))[0].startswith("run fix-tests: completed · 12 steps (12 replayed, 0 live)")
    outline = cells.text('outline("fix-tests")').splitlines()
    assert outline[-1] == "status: interrupted"
    assert outline[-2].split()[1:] == ["step_started", "model:2"], "the last event is the intent of step 6"
    before, after = (cell_text(c) for c in cells.all("python3 -B -m unittest"))
    assert "FAILED" in before and after.strip().endswith("OK")
    resumed = cells.text("print(\"replayed:\", resumed")
    assert "replayed: 5  live: 7  status: completed" in resumed, "five recorded steps replay, the rest run live"
    saved = re.search(r"prompt caching saved:\s+simulated \$(\d+\.\d+)", resumed)
    assert saved and float(saved.group(1)) > 0, "the demo's cache savings show, labelled simulated"
    assert re.search(r"replay saved:\s+[1-9][\d,]* tokens  simulated \$", resumed)
    again = cells.text("print(\"replayed:\", again")
    assert "live: 0" in again and "paid by this session: 0 " in again
    killed = cells.text("other.signal_kernel(signal.SIGKILL)").splitlines()
    assert killed[0] == "killed the other kernel during model turn 2; its run:"
    assert killed[-1] == "status: interrupted" and "model:2" in "\n".join(killed), "a real kill, mid-run"
    counts = re.search(r"\((\d+) replayed, (\d+) live\)", cells.text("%agent_resume restart-me"))
    assert counts is not None and int(counts[1]) >= 5 and int(counts[2]) >= 1, "this kernel resumed the killed run"
    assert "completed" in cell_text(cells.all("%agent_runs")[1])
    # The restart by hand reuses the crash cell, whose --crash-at 6 stops the run before its
    # first run_bash, so before the approval the reader is to leave unanswered: kept, the
    # flag would crash the run instead of making it wait.
    assert "run_bash" not in cell_text(crash)
    assert "with `--run by-hand` instead of `--run fix-tests` and without `--crash-at 6`" in cells.prose


def claims_04(cells: Cells) -> None:
    def charges(snippet: str) -> list[str]:
        lines = [line for line in cells.text(snippet).splitlines() if line.startswith("charges:")]
        return re.findall(r"ch_\d+", lines[-1])

    assert "step_started" not in cells.text('crash("order-1", "--pure")'), "a pure step writes no intent"
    assert len(charges('checkout("order-1", effect="pure")')) == 2, "effect first: charged twice"
    assert "step_started    charge   order-2:charge" in cells.text('crash("order-2")\nevents')
    assert cells.text('print(read_run("order-2"').strip() == "in_doubt"
    assert "InDoubtError:" in cells.text('checkout("order-2")\nexcept')
    rerun = cells.text('checkout("order-2", in_doubt="rerun")')
    assert len(charges('checkout("order-2", in_doubt="rerun")')) == 2 and "rerun policy" in rerun
    assert len(charges('crash("order-3"')) == 1, "the key made the rerun harmless"
    checked = cells.text('crash("order-4"')
    assert len(charges('crash("order-4"')) == 1 and "done check" in checked
    skipped = cells.text('crash("order-5")')
    assert "True" in skipped and "idempotency key order-5:charge" in skipped
    asked = cells.text("def ask_person")
    assert "asked: ['charge']" in asked and "skip ada" in asked
    assert errors(cells.one("--crash-at 7")) == ["SimulatedCrash"]
    crashed = own_story(cells.one("--crash-at 7"))
    assert crashed[0].startswith("run fix-tests: crashed · ") and crashed[1] == "resumed in a later cell: completed there"
    failed = own_story(cells.one("--in-doubt fail"))
    assert failed[0].startswith("run fix-tests: in doubt · ") and failed[1] == "resumed in a later cell: completed there"
    assert cells.text('print(read_run("fix-tests"').strip() == "in_doubt"
    assert errors(cells.one("--in-doubt fail")) == ["InDoubtError"]
    skip = cells.text("--in-doubt skip")
    assert "completed" in skip.splitlines()[0] and re.search(r"^\s+skipped\s+run_bash", skip, re.M)


def claims_05(cells: Cells) -> None:
    retried = cells.text("result = run_agent(")
    assert re.findall(r"retrying (\d+/\d+)", retried) == ["1/5", "2/5", "3/5"]
    assert "completed - Done" in retried
    attempts = [line for line in cells.text("for a in step.attempts").splitlines() if "attempt" in line]
    assert len(attempts) == 3 and "529, then waited 1.000 s" in attempts[0]
    assert len([line for line in cells.text('if \'"attempt_failed"\'').splitlines() if line]) == 3
    assert "RetriesExhaustedError:" in cells.text("except RetriesExhaustedError")
    broken = cells.text("except ModelCallError")
    assert "ModelCallError:" in broken and "requests the model received: 3" in broken
    assert "failed" in cells.text("%agent_show needs-a-fix")
    fixed = cells.text("fixed = ScriptedModel(")
    assert "replayed: 4  live: 1" in fixed and "requests the fixed model received: 1" in fixed
    assert "replayed" in fixed and "completed - " in fixed
    cut = cells.text('run_id="cut"')
    assert cut.startswith("truncated - ") and "max_tokens=16000" in cut
    again = cells.text('resume_agent("cut"')
    assert "completed - Here is the whole plan." in again and "{'max_tokens': 32000}" in again
    refused = cells.text('run_id="refused"')
    assert "refused - " in refused and "cyber" in refused and "went to claude-opus-5-5" in refused
    capped = cells.text('run_id="capped"')
    assert capped.startswith("budget_exhausted after $0.20 - ") and "completed - Done within budget." in capped
    routed = cells.text('run_id="storm"')
    assert "completed - Done, on the fallback model." in routed
    assert "models asked: ['claude-opus-5-5', 'claude-opus-5-5', 'claude-opus-5-5', 'claude-opus-5-5', 'claude-haiku-5-5']" in routed
    assert "model:1: model -> claude-haiku-5-5 because overloaded: 3 x 529 (by fallback)" in routed
    grown = cells.text('run_id="grown"')
    assert "completed - Done: the notes say the tests pass." in grown
    assert "which says the tests pass." in grown and "replay: completed live steps: 0 requests: 6" in grown
    shown = cells.text("%agent_show grown")
    assert "compacted 3 messages into a summary" in shown and "saved ~" in shown


def claims_06(cells: Cells) -> None:
    first = own_story(cells.one("%%agent --run fix-tests\n"))
    assert first[1] == "log: tutorial-runs/06/runs/fix-tests.jsonl", "the JSONL cell names its own log"
    assert own_story(cells.one("--store sqlite:///"))[1].startswith("log: ") and "runs.db" in own_story(cells.one("--store sqlite:///"))[1]
    assert "fix-tests completed 12/12 steps" in cells.text("for s in list_runs(STORE)")
    usage = cells.text('usage = reply["usage"]').splitlines()
    assert re.fullmatch(r"\d[\d,]* tokens in \(\d+ read from the cache\), \d+ out", usage[1]), usage
    assert "wrote tutorial-runs/06/fix-tests.ipynb" in cells.text("-m nb_durable export")
    assert "[markdown] # Run `fix-tests`" in cells.text("exported = nbformat.read")
    assert "forked fix-tests at step 7" in cells.text("-m nb_durable fork")
    fork = cells.text("%agent_resume fix-tests-fork")
    assert "(7 replayed, 5 live)" in fork
    assert re.search(r"^\s+live\s+write_file\s+calc.py", fork, re.M), "the fork's model writes the fix again"
    assert cells.text("python3 -B -m unittest").strip() == "OK"
    assert len(cells.text("import sqlite3").splitlines()) == 3


def claims_07(cells: Cells) -> None:
    listed = cells.text("mcp = mcp_tools(").splitlines()
    assert [line.split() for line in listed] == [
        ["search_notes", "pure", "from", "readOnlyHint"],
        ["whoami", "pure", "from", "readOnlyHint"],
        ["tag_note", "idempotent", "from", "idempotentHint"],
        ["send_note", "external", "from", "destructiveHint"],
    ]
    ran = cells.text("result = run_agent(")
    assert ran.startswith("completed - ")
    assert re.search(r"effect recorded: external\s+sent to ada", ran) and re.search(r"effect recorded: idempotent", ran)
    assert len(re.findall(r"pure \(no intent written\)", ran)) == 2
    assert "token [REDACTED:notes.env.NOTES_TOKEN]" in ran
    assert re.search(r"outbox: notes:tool:2:0:toolu_\w+\tada: The release moves to Friday.", ran), "the key leads the line"
    shown = cells.text("%agent_show notes")
    assert "send_note · MCP notes · external" in shown and "search_notes · MCP notes · pure" in shown
    crashed = cells.one("CrashAt(7)")
    assert errors(crashed) == ["SimulatedCrash"]
    [error] = [out for out in crashed.outputs if out["output_type"] == "error"]
    assert len(error["traceback"]) == 1 and error["traceback"][0].startswith("SimulatedCrash: simulated crash at step 7"), error
    resumed = cells.text('resume_agent("crash"').splitlines()
    assert resumed[0] == "in_doubt" and resumed[1] == "completed (6 replayed, 2 live)"
    assert len([line for line in resumed if "ada: The release" in line]) == 2, "one note per run, none twice"
    replayed = cells.text("McpToolset.from_run(settings, broken")
    assert '"env": ["NOTES_TOKEN"]' in replayed and "completed (8 replayed, 0 live), servers started: {}" in replayed
    changed = cells.text("except ToolsChangedError")
    assert changed.startswith("ToolsChangedError:") and "tool 'send_note' of MCP server 'notes'" in changed and "added cc" in changed
    assert cells.text("kernel_tools(get_ipython())").strip() == "The prices add up to 12. | total = 12"
    assert not any("notes-token-3f9a61c2" in cell_text(c) for c in cells.code), "the token shows in no output"


def claims_08(cells: Cells) -> None:
    me = who()  # the kernel's environment is this process's: the same person decides
    started = cells.one("%%agent --run fix-tests --background -o run")
    [shown] = [out for out in started.outputs if out["output_type"] == "display_data"]
    assert "application/vnd.jupyter.widget-view+json" not in shown["data"], "%agent_wait froze the widget"
    assert cell_text(started).splitlines()[2].startswith("run fix-tests: completed · 16 steps (0 replayed, 16 live)")
    assert cells.text('print("ended:"') == "ended: False - result: None\n", "the cell returned; the run went on"
    asked = cells.text("def question(handle").splitlines()
    assert asked[0].startswith("approval of run_bash at step approval:2:0:toolu_")
    assert asked[-1] == "answers: ('approve', 'deny')"
    # The log's reader sees what the handle sees: the writer's lease is marked with its question.
    status, waits_for = cells.text("summary = read_run").strip().splitlines()
    assert status == "waiting - waiting after 6 steps - lease held by this kernel: True"
    assert waits_for.startswith("waiting since ") and " for approval of step approval:2:0:toolu_" in waits_for, waits_for
    asking, waited = [c for c in cells.code if c.source == "%agent_wait fix-tests"]
    assert errors(asking) == ["UsageError"] and "run fix-tests waits for an answer" in cell_text(asking)
    assert errors(waited) == [], "answered, the run was waited for to its end"
    assert cells.text('asked.deny(note=').strip() == "True"
    recorded = cells.text('decisions("fix-tests")\nprint(run.status').splitlines()
    assert [line.split()[1:] for line in recorded[:3]] == [
        ["denied", "by", f"{me}:", "not", "before", "I", "have", "read", "the", "test", "file"],
        ["approved", "by", f"{me}:", "the", "tests", "change", "nothing"],
        ["approved", "by", f"{me}:", "checking", "the", "fix"],
    ]
    assert recorded[3] == "completed - Done. The tests pass now (6 ran: OK)."
    shown_run = cells.text("%agent_show fix-tests")
    assert f"denied by {me}" in shown_run and shown_run.count(f"approved by {me}") == 2

    assert errors(cells.all("%agent_wait stop-me")[0]) == ["RunStopped"]
    resumed = cells.text("%agent_resume stop-me --background -o resumed")
    # The stopped session's cell keeps its own story (in doubt), with one line of how a later cell ended it.
    cut_short = own_story(cells.one("%agent_resume stop-me --background -o resumed"))
    assert cut_short[0].startswith("run stop-me: in doubt · ") and cut_short[1] == "resumed in a later cell: completed there"
    assert own_story(cells.one("%agent_resume stop-me --background --in-doubt ask"))[0].startswith("run stop-me: completed · ")
    assert re.search(r"^run stop-me: .* paid [\d,]+ tokens \(simulated \$", resumed, re.M), "the demo's dollars, resumed"
    [let_finish, ended] = cells.text("for step in record.steps").splitlines()
    assert re.fullmatch(r"model:0 completed \d+\.\d s after the stop was asked", let_finish)
    assert float(let_finish.split()[2]) > 0, "the model call in flight finished after the stop, and was recorded"
    assert ended == "interrupted - stopped by the user"
    assert errors(cells.all("%agent_wait stop-me")[1]) == ["RunStopped"]
    [cut, ran] = cells.text("cut = record.steps[-1]").splitlines()
    assert re.fullmatch(r"tool:2:0:toolu_\w+ external in_doubt - the run: in_doubt", cut)
    assert float(ran.split()[3]) < 30, "the 60 s command was killed"
    doubt = cells.text("asked = question(resumed)").splitlines()
    assert doubt[0].startswith("in_doubt at step tool:2:0:toolu_") and doubt[1] == "answers: ('rerun', 'skip', 'fail')"
    settled = cells.text('decisions("stop-me")').split()
    assert settled[1:4] == ["rerun", "by", f"{me}:"] and settled[-1] == "completed"
    assert errors(cells.all("%agent_wait stop-me")[2]) == []

    forked = cells.text("%agent_resume fix-tests-fork7")
    assert "run fix-tests-fork7: completed · 11 steps (7 replayed, 4 live)" in forked and "nothing to fix" in forked
    assert cells.text("asked = question(forked)").startswith("asked about: approval:3:0:")
    fork_decisions = cells.text('decisions("fix-tests-fork7")').splitlines()
    assert [line.split()[1] for line in fork_decisions[:2]] == ["denied", "approved"], "the copied denial replayed"
    assert fork_decisions[1].endswith("the fork may run the tests") and fork_decisions[2] == "completed"

    refused = cells.one("--kernel-tools")
    assert errors(refused) == ["UsageError"] and "cannot run in the background" in cell_text(refused)


def claims_09(cells: Cells) -> None:
    assert errors(cells.one("--crash-at 4")) == ["SimulatedCrash"]
    crashed, resumed = cells.all("tree()")
    before = cell_text(crashed).splitlines()
    assert len(before) == 2 and all(" interrupted 0 steps, started by delegate:0:" in line for line in before), before
    after = cell_text(resumed).splitlines()
    assert len(after) == 2 and all(" completed " in line for line in after), after
    resume = cells.text("%agent_resume tree")
    assert re.search(r"run tree: completed · \d+ steps \(3 replayed, \d+ live\)", resume), resume
    assert "Done, with two sub-agents. The regression test passes" in resume
    shown = cells.text("-m nb_durable show tree --tree")
    assert " with 2 child runs" in shown and shown.count("  └ tree.delegate-0-") == 2, shown
    assert cells.text("%agent_runs").count("└ tree.delegate-0-") == 2
    # A crash inside the second child, and the resume that finishes the tree.
    inner = cells.one("--crash-at 2.3")
    assert errors(inner) == ["SimulatedCrash"] and "at step 3 of child run inner.delegate-0-1-" in cell_text(inner)
    first, second = cell_text(cells.one('tree("inner")')).splitlines()
    assert " completed " in first and " interrupted 3 steps, started by delegate:0:1:" in second, (first, second)
    again = cells.text("%agent_resume inner")
    assert re.search(r"run inner: completed · \d+ steps \(4 replayed, \d+ live\)", again), again
    once = cells.text('recorded_once("inner")').splitlines()
    assert len(once) == 3 and all(" completed " in line and line.endswith(" 0 recorded twice") for line in once), once


def claims_10(cells: Cells) -> None:
    crashed = cells.one("--run cell-run")
    assert errors(crashed) == ["SimulatedCrash"]
    assert own_story(crashed)[0].startswith("run cell-run: crashed · 4 steps (0 replayed, 4 live)")
    queued = cells.text("run --batch tutorial-runs/10/tasks.jsonl")
    assert "queued fix-b (line 2, priority 5)" in queued and "3 run(s) queued" in queued, queued

    order = "workers take these runs highest priority first, then the oldest: "

    def listed(cell: Any) -> dict[str, list[str]]:
        rows = cell_text(cell).splitlines()[2:]
        return {row.split()[0]: row.split() for row in rows if not row.startswith(order)}

    before, after = [c for c in cells.code if c.source == "%agent_runs"]
    # A priority column while a run waits for a worker with one (the cell's run has the default, 0).
    assert {run: row[1:4] for run, row in listed(before).items()} == {
        "cell-run": ["interrupted", "0", "4"], "fix-a": ["queued", "0", "0"], "fix-b": ["queued", "5", "0"], "fix-c": ["queued", "1", "0"],
    }  # fmt: skip
    nightly = cells.one("--status queued --tag nightly")
    assert sorted(listed(nightly)) == ["fix-a", "fix-c"]
    assert cell_text(nightly).splitlines()[-1] == order + "fix-c, fix-a", cell_text(nightly)  # the listing's order is the newest first
    # A page of two of the batch's three runs names the next; that line lists the third, and only it.
    first, rest = cells.one("first = %agent_runs"), cells.one("first.next_page")
    caption = cell_text(first).splitlines()[0]
    assert "more: %agent_runs --store sqlite:///tutorial-runs/10/runs.db --batch tutorial-runs/10/tasks.jsonl --limit 2 --after A" in caption, caption
    assert len(listed(first)) == 2 and sorted([*listed(first), *listed(rest)]) == ["fix-a", "fix-b", "fix-c"], cell_text(rest)
    # The worker took the highest priority first and was killed while fix-b waited for its model.
    killed = cells.text("first.send_signal(signal.SIGKILL)").splitlines()
    assert re.fullmatch(r"fix-b: interrupted, \d+ steps recorded; its log ends with step_started model:\d+", killed[0]), killed
    assert [line for line in killed[1:] if line.strip()] == [killed[1]] and "1 at a time" in killed[1], "it took nothing else"
    finished = cells.text("second, third = worker")
    assert "4 of 4 run(s) completed" in finished and finished.count("stopping; runs in flight stop") == 2, finished
    replayed = dict(re.findall(r"^(\S+): completed \((\d+) steps replayed", finished, re.M))
    assert replayed["fix-a"] == replayed["fix-c"] == "0" and replayed["cell-run"] == "4" and int(replayed["fix-b"]) >= 5, replayed
    once = cells.text("recorded twice").splitlines()
    assert [line.split()[:3] for line in once] == [
        ["cell-run", "completed", "13"], ["fix-a", "completed", "13"], ["fix-b", "completed", "14"], ["fix-c", "completed", "13"],
    ]  # fmt: skip
    assert all(line.endswith(" 0 recorded twice") for line in once)
    assert "which is why it counts 14 steps to the others' 13" in cells.prose
    assert all(row[-1] != "-" for row in listed(after).values()), "each run says which worker resumed it"
    assert "equals its logs (4 run(s))" in cells.text("check-index")
    assert "--batch-api cannot be used with the offline demo model" in cells.text("--batch-api --demo")


CLAIMS: dict[str, Callable[[Cells], None]] = {
    "01": claims_01,
    "02": claims_02,
    "03": claims_03,
    "04": claims_04,
    "05": claims_05,
    "06": claims_06,
    "07": claims_07,
    "08": claims_08,
    "09": claims_09,
    "10": claims_10,
}
