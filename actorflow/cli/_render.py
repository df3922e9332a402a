"""How the CLI shows things: consoles, tables, the decision log, diffs, outcomes.

Commands fetch data; the functions here only render it,
as rich tables for people or JSON for programs.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import sys
from typing import TYPE_CHECKING, Any, Final

from rich.console import Console
from rich.table import Table

from actorflow.cli import _inspect
from actorflow.storage import (
    DecisionRecord,
    EventRecord,
    MilestoneRecord,
    PhaseEndRecord,
    StepRecord,
)

if TYPE_CHECKING:
    from actorflow.storage import LogRecord, RunManifest, SnapshotInfo

__all__ = [
    "err",
    "manifest_row",
    "out",
    "print_diff",
    "print_json",
    "print_outcomes",
    "print_record",
    "print_result",
    "size",
    "status_text",
    "when",
]


def out() -> Console:
    """The console for results (stdout); made per call so it sees the current width."""
    return Console(highlight=False, width=_pipe_width(sys.stdout))


def _pipe_width(stream: Any) -> int | None:
    # Rich assumes 80 columns off a terminal; in pipes and files, wide rows beat folded ones.
    isatty = getattr(stream, "isatty", None)
    if "COLUMNS" in os.environ or (isatty is not None and isatty()):
        return None
    return 160


def err() -> Console:
    """The console for errors and progress (stderr)."""
    return Console(stderr=True, highlight=False, soft_wrap=True)


def print_json(data: Any) -> None:
    """``data`` as indented JSON on stdout (plain print, so pipes get exact bytes)."""
    sys.stdout.write(json.dumps(_inspect.plain(data), indent=2, default=str) + "\n")


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


def manifest_row(m: RunManifest, snapshots: list[SnapshotInfo]) -> dict[str, Any]:
    """What ``runs`` shows of one run, given its ``list_snapshots``."""
    live = _inspect.live_snapshots(snapshots)
    return {
        "run_id": m.run_id,
        "workflow": m.workflow,
        "status": str(m.status),
        "phase": m.phase,
        "started": m.created,
        "updated": m.updated,
        "snapshots": len(live),
        "size": sum(s.stored_size for s in live),
        "parent": m.parent,
        "error": f"{m.error.type}: {m.error.message}" if m.error else None,
        "prompt": m.prompt,
    }


_STATUS_STYLE: Final = {
    "completed": "green",
    "running": "cyan",
    "paused": "yellow",
    "interrupted": "yellow",
    "failed": "red",
    "cancelled": "dim",
}


def status_text(status: str) -> str:
    """A run status in its colour."""
    return f"[{_STATUS_STYLE.get(status, 'white')}]{status}[/]"


def print_diff(d: dict[str, Any]) -> None:
    """A diff from :func:`actorflow.cli._inspect.diff_snapshots`, for people."""
    f, t = d["from"], d["to"]
    out().print(
        f"[bold]{d['run_id']}[/]: {f['checkpoint']} (position {f['position']}, {f['phase']}) "
        f"-> {t['checkpoint']} (position {t['position']}, {t['phase']})"
    )
    if d["status"]:
        out().print(f"status: {d['status'][0]} -> {d['status'][1]}")
    if d["phases_finished"]:
        out().print("phases finished: " + ", ".join(d["phases_finished"]))
    table = Table(title="agents", show_lines=False)
    for col in ("agent", "change", "field", "before", "after"):
        table.add_column(col, overflow="fold")
    for name, change in d["agents"].items():
        if change["change"] != "changed":
            table.add_row(name, change["change"], "", "", "")
            continue
        for attr in ("status", "confidence", "type"):
            if attr in change:
                table.add_row(name, "changed", attr, *(_cell(v) for v in change[attr]))
        for field, (old, new) in change.get("state", {}).items():
            table.add_row(name, "state", field, _cell(old), _cell(new))
    out().print(table if d["agents"] else "agents: no change")
    for dec in d["decisions_added"]:
        conf = "" if dec["confidence"] is None else f" (confidence {dec['confidence']:.2f})"
        out().print(f"decision [bold]{dec['type']}[/] by {dec['agent']}{conf}: {dec['rationale']}")
    for name, (old, new) in d["metrics"].items():
        out().print(f"metric {name}: {old} -> {new}")


def _cell(value: Any) -> str:
    text = json.dumps(_inspect.plain(value), default=str)
    return text if len(text) <= 60 else text[:57] + "..."


def print_record(position: int, record: LogRecord, *, as_json: bool) -> None:
    """One log record: a line (or a few) for people, or one JSON object per line."""
    data = _inspect.record_to_dict(record)
    if as_json:
        sys.stdout.write(json.dumps({"position": position, **data}, default=str) + "\n")
        return
    match record:
        case DecisionRecord():
            conf = "" if record.confidence is None else f" confidence={record.confidence:.2f}"
            alts = f" alternatives={list(record.alternatives)}" if record.alternatives else ""
            out().print(
                f"{position:>6} [bold magenta]decision[/] {record.step_id} {record.agent}: "
                f"[bold]{record.type}[/]{conf}{alts}"
            )
            if record.description:
                out().print(f"       {record.description}")
            if record.rationale:
                out().print(f"       rationale: {record.rationale}")
        case StepRecord():
            outcome = (
                f"[red]{record.error.type}: {record.error.message}[/]"
                if record.error
                else _cell(data["result"])
            )
            target = f" -> {record.target}" if record.target else ""
            out().print(f"{position:>6} [cyan]{record.kind}[/] {record.step_id}{target}: {outcome}")
        case PhaseEndRecord():
            out().print(
                f"{position:>6} [green]phase end[/] {record.phase_id}: {_cell(data['result'])}"
            )
        case MilestoneRecord():
            out().print(f"{position:>6} milestone {record.agent} {record.key}")
        case EventRecord():
            out().print(f"{position:>6} [yellow]event[/] {record.kind} {record.step_id or ''}")


def print_outcomes(finished: list[Any], left: list[Any], *, as_json: bool) -> None:
    """What recover did: each run finished (with replayed steps) or left as it is."""
    if as_json:
        print_json({"recovered": finished, "not_finished": left})
    for o in finished if not as_json else ():
        out().print(
            f"[green]recovered[/] {o.run_id}: completed, replayed {o.replayed_steps} "
            "recorded step(s) from the log"
        )
        print_result(o.result)
    for o in left if not as_json else ():
        out().print(f"[yellow]not finished[/] {o.run_id}: {o.status} {o.error or ''}")
    if not as_json and not finished and not left:
        out().print("no orphaned runs to recover")


def print_result(result: Any) -> None:
    """A run's result: the demo's summary table, anything else as JSON."""
    # Imported here: only commands that ran a workflow print results, and they loaded the demo.
    from actorflow._demo import ReviewSummary, summary_table

    if isinstance(result, ReviewSummary):
        out().print(summary_table(result))
        out().print(f"  report: {result.report_path}")
    elif result is not None:
        out().print(
            _cell(result) if len(_cell(result)) < 60 else json.dumps(_inspect.plain(result))
        )
