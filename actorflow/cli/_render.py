"""How the CLI shows things: consoles, tables, the decision log, diffs, outcomes.

Commands fetch data; the functions here only render it,
as rich tables for people or JSON for programs. Text is Rich markup, so
everything that comes from a user's data or an exception (results, errors,
prompts, decisions, names, ids, triggers, phases) goes through :func:`esc`
and is never read as markup; the consoles read no emoji codes either.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import sys
from typing import TYPE_CHECKING, Any, Final

import msgspec
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from actorflow.cli._program import suggest
from actorflow.runtime import reading
from actorflow.runtime.reading import WAIT_KINDS, read_request
from actorflow.storage import (
    DecisionRecord,
    EventRecord,
    MilestoneRecord,
    PhaseEndRecord,
    StepRecord,
)

if TYPE_CHECKING:
    from collections.abc import Callable

    from actorflow.runtime.reading import ListedRun, SealedRun
    from actorflow.storage import LogRecord

__all__ = [
    "add_result_view",
    "display",
    "err",
    "esc",
    "out",
    "owner_text",
    "paused_text",
    "print_diff",
    "print_json",
    "print_outcome",
    "print_outcomes",
    "print_record",
    "print_result",
    "run_row",
    "sealed_row",
    "size",
    "status_text",
    "when",
]


def esc(value: object) -> str:
    """``value`` as text that Rich prints as it is, never as markup.

    Rich's ``escape`` doubles a trailing backslash so that it cannot escape a
    tag after it, which shows twice when no tag follows; here trailing
    backslashes sit between a tag pair of their own, so they show as they are.
    """
    text = str(value)
    body = text.rstrip("\\")
    trailing = len(text) - len(body)
    if not trailing:
        return escape(body)
    return escape(body) + "[none]" + "\\" * (2 * trailing) + "[/none]"


def out() -> Console:
    """The console for results (stdout); made per call so it sees the current width.

    Lines are never folded (tables still fit the width): a command it suggests
    must copy and paste whole, and a line of output stays one line for a script.
    """
    return Console(highlight=False, emoji=False, width=_pipe_width(sys.stdout), soft_wrap=True)


def _pipe_width(stream: Any) -> int | None:
    # Rich assumes 80 columns off a terminal; in pipes and files, wide rows beat folded ones.
    isatty = getattr(stream, "isatty", None)
    if "COLUMNS" in os.environ or (isatty is not None and isatty()):
        return None
    return 160


def err() -> Console:
    """The console for errors and progress (stderr)."""
    return Console(stderr=True, highlight=False, emoji=False, soft_wrap=True)


def display() -> Console | None:
    """The console for live progress: stderr when it is a terminal, else none.

    Scripts read stdout, and a progress bar's frames in a pipe or a log file
    are noise: off a terminal nothing shows.
    """
    isatty = getattr(sys.stderr, "isatty", None)
    return err() if isatty is not None and isatty() else None


def print_json(data: Any) -> None:
    """``data`` as indented JSON on stdout (plain print, so pipes get exact bytes)."""
    sys.stdout.write(json.dumps(reading.plain(data), indent=2, default=str) + "\n")


def when(ts: float | None) -> str:
    """A stored time, local: ``HH:MM:SS`` today, else ``YYYY-MM-DD HH:MM``."""
    if not ts:
        return "-"
    moment = dt.datetime.fromtimestamp(ts)
    if moment.date() == dt.date.today():
        return moment.strftime("%H:%M:%S")
    return moment.strftime("%Y-%m-%d %H:%M")


def size(n: int) -> str:
    """Bytes for people: ``512 B``, ``3.4 KB``, ``12.0 MB``."""
    value = float(n)
    for unit in ("B", "KB", "MB", "GB"):
        if value < 1024 or unit == "GB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")


def run_row(run: ListedRun) -> dict[str, Any]:
    """What ``runs`` shows of one run (``--json`` prints these as they are)."""
    m, progress, claim = run.manifest, run.progress, run.progress.claim
    live = reading.live_snapshots(run.snapshots)
    return {
        "run_id": m.run_id,
        "workflow": m.workflow,
        "code_version": m.code_version,
        "status": str(m.status),
        "phase": progress.phase,
        "started": m.created,
        "updated": m.updated,
        "activity": progress.activity,
        "owner": claim.owner,
        "alive": claim.alive,
        "lease_expires": claim.expires,
        "snapshots": len(live),
        "size": sum(s.stored_size for s in live),
        "parent": m.parent,
        "parent_run": m.parent_run,
        "error": f"{m.error.type}: {m.error.message}" if m.error else None,
        "prompt": m.prompt,
        "deadline": m.deadline,
        "blocked_code_version": m.blocked_code_version,
        "queue": m.queue,
        "priority": m.priority,
        "dedup_key": m.dedup_key,
        "schedule": m.schedule,
        "encrypted_with": None,
    }


def sealed_row(run: SealedRun) -> dict[str, Any]:
    """What ``runs`` shows of a run sealed with a key the store was not given."""
    return {
        "run_id": run.run_id,
        "workflow": None,
        "code_version": None,
        "status": "encrypted",
        "phase": None,
        "started": None,
        "updated": None,
        "activity": None,
        "owner": run.claim.owner,
        "alive": run.claim.alive,
        "lease_expires": run.claim.expires,
        "snapshots": None,
        "size": None,
        "parent": None,
        "parent_run": None,
        "error": None,
        "prompt": None,
        "deadline": None,
        "blocked_code_version": None,
        "queue": None,
        "priority": None,
        "dedup_key": None,
        "schedule": None,
        "encrypted_with": run.key_id,
    }


def owner_text(row: dict[str, Any]) -> str:
    """The owner cell of ``runs``: ``host:pid``, and whether that process still holds the run."""
    owner, alive, expires = row["owner"], row["alive"], row["lease_expires"]
    if row["status"] in _ENDED or (owner is None and alive is None):
        return "-"
    if owner is None and not alive:
        return "[dim]none[/]"  # never claimed, or its owner's name is sealed: nobody holds it
    who = esc(_host_pid(owner)) if owner else "?"
    if alive is None:
        return f"{who} [dim]unknown[/]"
    lease = ""
    if expires:  # a timed lease: held until it runs out, unless its owner renews it
        lease = f" (lease until {when(expires)})" if alive else f" (lease ran out {when(expires)})"
    return f"{who} [green]alive[/]{lease}" if alive else f"{who} [red]gone[/]{lease}"


def _host_pid(owner: str) -> str:
    # a Runtime claims as host:pid:tag; the tag only tells runtimes of one process apart
    host, _, rest = owner.partition(":")
    pid, _, _tag = rest.partition(":")
    return f"{host}:{pid}" if pid.isdigit() else owner


_ENDED: Final = ("completed", "failed", "cancelled")
"""Statuses of runs that nobody owns any more: their owner is not shown."""

_STATUS_STYLE: Final = {
    "completed": "green",
    "queued": "cyan",
    "running": "cyan",
    "paused": "yellow",
    "interrupted": "yellow",
    "failed": "red",
    "cancelled": "dim",
    "blocked": "magenta",
    "encrypted": "blue",
}


def status_text(status: str) -> str:
    """A run status in its colour."""
    return f"[{_STATUS_STYLE.get(status, 'white')}]{esc(status)}[/]"


def print_diff(d: dict[str, Any]) -> None:
    """A diff from :func:`actorflow.runtime.reading.diff_snapshots`, for people."""
    f, t = d["from"], d["to"]
    out().print(
        f"[bold]{esc(d['run_id'])}[/]: {esc(f['checkpoint'])} (position {f['position']}, "
        f"{esc(f['phase'])}) -> {esc(t['checkpoint'])} (position {t['position']}, "
        f"{esc(t['phase'])})"
    )
    if d["status"]:
        out().print(f"status: {esc(d['status'][0])} -> {esc(d['status'][1])}")
    if d["phases_finished"]:
        out().print("phases finished: " + ", ".join(esc(p) for p in d["phases_finished"]))
    table = Table(title="agents", show_lines=False)
    for col in ("agent", "change", "field", "before", "after"):
        table.add_column(col, overflow="fold")
    for name, change in d["agents"].items():
        if change["change"] != "changed":
            table.add_row(esc(name), esc(change["change"]), "", "", "")
            continue
        for attr in ("status", "confidence", "type"):
            if attr in change:
                table.add_row(esc(name), "changed", attr, *(_cell(v) for v in change[attr]))
        for field, (old, new) in change.get("state", {}).items():
            table.add_row(esc(name), "state", esc(field), _cell(old), _cell(new))
    out().print(table if d["agents"] else "agents: no change")
    for dec in d["decisions_added"]:
        conf = "" if dec["confidence"] is None else f" (confidence {dec['confidence']:.2f})"
        out().print(
            f"decision [bold]{esc(dec['type'])}[/] by {esc(dec['agent'])}{conf}: "
            f"{esc(dec['rationale'])}"
        )
    for name, (old, new) in d["metrics"].items():
        out().print(f"metric {esc(name)}: {esc(old)} -> {esc(new)}")


def _cell(value: Any) -> str:
    """A value as short JSON, escaped: a cell or a line's tail."""
    text = json.dumps(reading.plain(value), default=str)
    return esc(text if len(text) <= 60 else text[:57] + "...")


def print_record(position: int, record: LogRecord, *, as_json: bool) -> None:
    """One log record: a line (or a few) for people, or one JSON object per line."""
    data = reading.record_to_dict(record)
    if as_json:
        sys.stdout.write(json.dumps({"position": position, **data}, default=str) + "\n")
        return
    match record:
        case DecisionRecord():
            conf = "" if record.confidence is None else f" confidence={record.confidence:.2f}"
            alts = f" alternatives={esc(list(record.alternatives))}" if record.alternatives else ""
            # The type leads: a decision outside any phase has the bare step id "0".
            out().print(
                f"{position:>6} [bold magenta]decision[/] [bold]{esc(record.type)}[/] "
                f"by {esc(record.agent)} (step {esc(record.step_id)}){conf}{alts}"
            )
            if record.description:
                out().print(f"       {esc(record.description)}")
            if record.rationale:
                out().print(f"       rationale: {esc(record.rationale)}")
        case StepRecord(kind="emit", error=None) if isinstance(data["result"], dict):
            # a durable emit (ctx.emit(..., durable=True)): the event is what a reader came for
            emitted = data["result"]
            out().print(
                f"{position:>6} [bold blue]emit[/] [bold]{esc(emitted.get('type'))}[/] by "
                f"{esc(emitted.get('agent'))} (step {esc(record.step_id)}): "
                f"{_cell(emitted.get('event'))}"
            )
        case StepRecord():
            outcome = (
                f"[red]{esc(record.error.type)}: {esc(record.error.message)}[/]"
                if record.error
                else _cell(data["result"])
            )
            target = f" -> {esc(record.target)}" if record.target else ""
            step = f"[cyan]{esc(record.kind)}[/] {esc(record.step_id)}"
            tries = f" [dim]after {record.attempts} attempts[/]" if record.attempts > 1 else ""
            out().print(f"{position:>6} {step}{target}: {outcome}{_took(record)}{tries}")
            message = data.get("message")
            if isinstance(message, dict):  # what it sent, when the runtime kept it
                sent = _cell(message["value"]) if "value" in message else "(kept in a blob)"
                out().print(f"       [dim]message {esc(message['type'])}:[/] {sent}")
            for n, failed in enumerate(record.attempt_errors, 1):
                out().print(
                    f"       attempt {n} failed: [red]{esc(failed.type)}: {esc(failed.message)}[/]"
                )
        case PhaseEndRecord():
            out().print(
                f"{position:>6} [green]phase end[/] {esc(record.phase_id)}: {_cell(data['result'])}"
            )
        case MilestoneRecord():
            out().print(f"{position:>6} milestone {esc(record.agent)} {esc(record.key)}")
        case EventRecord():
            # A wait's request (what it waits for, its prompt) is what a reader came for.
            shown = _wait_text(record)
            out().print(
                f"{position:>6} [yellow]event[/] {esc(record.kind)} "
                f"{esc(record.step_id or '')}{shown}"
            )


def _took(record: StepRecord) -> str:
    """`` (1.2s)``: how long a step took, issued to recorded (nothing for older records)."""
    if not record.issued or record.time < record.issued:
        return ""
    took = record.time - record.issued
    shown = f"{took * 1000:.0f}ms" if took < 1 else f"{took:.1f}s"
    return f" [dim]({shown})[/]"


def _wait_text(record: EventRecord) -> str:
    """``: <prompt or type> until <deadline>`` for a wait's request; else nothing."""
    kind = record.kind.removesuffix("_requested")
    if kind == record.kind or kind not in WAIT_KINDS:
        return ""
    try:
        request = read_request(kind, record.data or b"")
    except msgspec.DecodeError:
        return ""
    what = request.prompt if request.prompt is not None else request.type
    until = f" until {when(request.deadline)}" if request.deadline is not None else ""
    return f": {esc(what)}{until}"


def print_outcomes(outcomes: list[Any], *, as_json: bool) -> None:
    """What recover did: each run finished, paused, failed or left as it is."""
    if as_json:
        done = [o for o in outcomes if o.status == "completed"]
        print_json({"recovered": done, "not_finished": [o for o in outcomes if o not in done]})
        return
    for o in outcomes:
        print_outcome(o, verb="recovered")
    if not outcomes:
        out().print("no orphaned runs to recover")


def print_outcome(o: Any, *, verb: str) -> None:
    """One run the CLI drove (a ``RunOutcome``): one line, then its result or what it waits for.

    ``verb`` (markup, escaped by the caller) heads a completed run's line.
    Every command says the same of a run that paused (:func:`paused_text`).
    """
    run = esc(o.run_id)
    if o.status == "completed":
        out().print(f"[green]{verb}[/] {run}: completed{_restored(o)}")
        print_result(o.result)
    elif o.status == "paused":
        out().print(paused_text(o.run_id, o.prompt, o.signal))
    elif o.status in ("failed", "cancelled", "blocked"):
        out().print(f"[red]{esc(o.status)}[/] {run}: {esc(o.error)}")
        if o.status == "blocked":
            again = suggest("recover", o.run_id)
            out().print(f"  with code that replays its log: {esc(again)}")
    elif getattr(o, "corrupt", False):
        out().print(f"[red]not recovered[/] {run}: {esc(o.error)}")
    else:
        why = f" {esc(o.error)}" if o.error else ""
        out().print(f"[yellow]not finished[/] {run}: {esc(o.status)}{why}")


def paused_text(run_id: str, prompt: str | None, signal: str | None = None) -> str:
    """What every command says of a paused run: what it waits for, and how to give it.

    ``signal``: the type of the signal it waits for (``ctx.wait_for``), else it
    waits for input (``ctx.wait_for_input``), which ``resume`` answers.
    """
    if signal is not None:
        send = suggest("signal", run_id, signal, "--json", "DATA")
        return (
            f"[yellow]paused[/] {esc(run_id)}: waiting for a {esc(signal)} signal\n"
            f"  send it: {esc(send)}\n"
            f"  then:    {esc(suggest('recover', run_id))}"
        )
    answer = suggest("resume", run_id, "--response", "TEXT")
    return (
        f"[yellow]paused[/] {esc(run_id)}: waiting for input: {esc(prompt)}\n"
        f"  answer it: {esc(answer)}"
    )


def _restored(o: Any) -> str:
    """What a re-run took from the store: a checkpoint, and the log records after it."""
    steps = f"{o.replayed_steps} recorded step(s)"
    if o.checkpoint is not None:
        return (
            f"; restored checkpoint {esc(o.checkpoint)} (the log up to position "
            f"{o.checkpoint_position}) and replayed {steps} logged after it"
        )
    if o.replayed_steps:
        return f"; replayed {steps} from the log (no checkpoint)"
    return ""


_result_views: list[Callable[[Any], bool]] = []


def add_result_view(view: Callable[[Any], bool]) -> None:
    """Have :func:`print_result` offer a run's result to ``view`` first.

    ``view`` prints a result it knows how to show and returns True, else
    returns False without printing (the ``demo`` command adds the review's
    summary table).
    """
    _result_views.append(view)


def print_result(result: Any) -> None:
    """A run's result: as a view added for it shows it (:func:`add_result_view`), else JSON."""
    if any(view(result) for view in _result_views):
        return
    if result is not None:
        # raw, never folded at the terminal's width: a script parses this line
        sys.stdout.write(json.dumps(reading.plain(result), default=str) + "\n")
