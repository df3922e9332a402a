"""``actorflow compare``'s rendering: two runs side by side, differences highlighted.

The comparison itself is the library's (:func:`actorflow.runtime.compare_runs`);
here it becomes tables: the runs' status, result and error, then the phases,
decisions and steps that differ (all of them with ``--all``), each row with
the first run's value beside the second's.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from rich.table import Table

from actorflow.cli._render import esc, out
from actorflow.runtime.reading import plain

if TYPE_CHECKING:
    from actorflow.runtime import Compared, ComparedRun, RunComparison

__all__ = ["print_comparison"]

_ABSENT = "[dim]-[/]"
_WIDE = 70  # a cell's JSON beyond this is cut: the row says the value differs, --json has it


def print_comparison(comparison: RunComparison, *, everything: bool = False) -> None:
    """``comparison`` for people; equal phases, decisions and steps only with ``everything``."""
    a, b = comparison.a, comparison.b
    out().print(f"[bold]A[/] {_describe(a)}", soft_wrap=True)
    out().print(f"[bold]B[/] {_describe(b)}", soft_wrap=True)
    for run, other in ((b, a), (a, b)):
        if run.parent is not None:
            whose = "A's" if run.parent == other.run_id else esc(run.parent) + "'s"
            edited = ", ".join(esc(e.agent) for e in run.fork_edits)
            edits = f", with {edited} edited" if edited else ""
            out().print(
                f"{'B' if run is b else 'A'} is a fork of {whose} checkpoint "
                f"{esc(run.parent_snapshot)}{edits}",
                soft_wrap=True,
            )
    if not comparison.differs:
        out().print("[green]no difference[/]: same status, result, phases, decisions and steps")
    sections = (
        ("run", (comparison.status, comparison.result, comparison.error)),
        ("phases", comparison.phases),
        ("decisions", comparison.decisions),
        ("steps", comparison.steps),
    )
    for title, items in sections:
        _print_section(title, items, everything=everything or title == "run")


def _describe(run: ComparedRun) -> str:
    return f"{esc(run.run_id)}: {esc(run.workflow)}, {esc(run.status)}"


def _print_section(title: str, items: tuple[Compared, ...], *, everything: bool) -> None:
    shown = [i for i in items if everything or i.differs]
    same = sum(1 for i in items if not i.differs)
    if not shown:
        if items:
            out().print(f"{title}: all {len(items)} the same")
        return
    table = Table(title=title, title_justify="left", show_lines=True)
    table.add_column("", no_wrap=True)
    table.add_column(title if title != "run" else "", overflow="fold")
    table.add_column("A", overflow="fold")
    table.add_column("B", overflow="fold")
    for item in shown:
        table.add_row(*_row(item), style="yellow" if item.differs else "dim")
    out().print(table)
    if same and len(shown) < len(items):
        out().print(
            f"[dim]{same} of {len(items)} {title} the same, not shown (--all shows them)[/]"
        )


def _row(item: Compared) -> tuple[str, str, str, str]:
    mark = "≠" if item.differs else "="
    name = esc(item.label or item.key)
    if item.label and item.label != item.key:
        name += f" [dim]{esc(item.key)}[/]"
    if item.in_a and item.in_b and item.changes and item.changes[0].field != "<value>":
        # only the fields that changed: a long record's equal ones would hide them
        a = "\n".join(f"{esc(c.field)}: {_cell(c.a)}" for c in item.changes)
        b = "\n".join(f"{esc(c.field)}: {_cell(c.b)}" for c in item.changes)
        return mark, name, a, b
    a = _cell(item.a) if item.in_a else _ABSENT
    b = _cell(item.b) if item.in_b else _ABSENT
    return mark, name, a, b


def _cell(value: Any) -> str:
    text = json.dumps(plain(value), default=str, ensure_ascii=False)
    return esc(text if len(text) <= _WIDE else text[: _WIDE - 3] + "...")
