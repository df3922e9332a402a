"""Live progress of the demo: phase, files done / total, checkpoints written.

The workflow reports to whatever sink is installed (none by default, so the
workflow runs silently in tests and under ``--app``). The orchestrator reports,
not the reviewers, because it sees replayed and live results alike: after a
recovery the bar starts where the killed run stopped.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import TYPE_CHECKING

from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)

if TYPE_CHECKING:
    from collections.abc import Iterator

    from rich.console import Console

    from actorflow.runtime import RunHandle

__all__ = ["ProgressSink", "RichProgress", "progress", "use_progress", "watch_checkpoints"]


class ProgressSink:
    """Receives the demo's progress; this base class ignores it."""

    def phase(self, name: str, total: int | None = None) -> None:
        """A phase started; ``total`` units of work follow (files, areas)."""

    def files_done(self, count: int) -> None:
        """``count`` more files are reviewed."""
        self.advance(count)

    def advance(self, count: int = 1) -> None:
        """``count`` more units of the current phase are done."""

    def checkpoint_written(self, checkpoint_id: str) -> None:
        """The run wrote a checkpoint."""

    def replayed(self, steps: int) -> None:
        """Recovery replayed ``steps`` recorded steps."""


_current: ProgressSink = ProgressSink()


def progress() -> ProgressSink:
    """The installed sink (a silent one unless :func:`use_progress` installed another)."""
    return _current


@contextmanager
def use_progress(sink: ProgressSink) -> Iterator[ProgressSink]:
    """Install ``sink`` for the demo workflow while the block runs."""
    global _current
    previous, _current = _current, sink
    try:
        yield sink
    finally:
        _current = previous


class RichProgress(ProgressSink):
    """A rich progress bar: phase, done / total, checkpoints written, elapsed."""

    def __init__(self, console: Console) -> None:
        self.checkpoints = 0
        self.files = 0
        self.bar = Progress(
            SpinnerColumn(),
            TextColumn("[bold]{task.description:<9}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[unit]}"),
            TextColumn("[dim]checkpoints: {task.fields[checkpoints]}"),
            TimeElapsedColumn(),
            console=console,
            transient=False,
        )
        self.task: TaskID = self.bar.add_task("starting", total=None, unit="", checkpoints=0)

    def __enter__(self) -> RichProgress:
        self.bar.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.bar.stop()

    def phase(self, name: str, total: int | None = None) -> None:
        unit = {"analyse": "files", "evaluate": "areas", "re-review": "areas"}.get(name, "")
        # A new task per phase: rich cannot turn a counted task back into a spinner.
        self.bar.remove_task(self.task)
        self.task = self.bar.add_task(name, total=total, unit=unit, checkpoints=self.checkpoints)

    def files_done(self, count: int) -> None:
        self.files += count
        self.advance(count)

    def advance(self, count: int = 1) -> None:
        self.bar.advance(self.task, count)

    def checkpoint_written(self, checkpoint_id: str) -> None:
        self.checkpoints += 1
        self.bar.update(self.task, checkpoints=self.checkpoints)

    def replayed(self, steps: int) -> None:
        self.bar.console.print(f"replayed {steps} recorded step(s) from the log")


async def watch_checkpoints(handle: RunHandle, sink: ProgressSink) -> None:
    """Count ``handle``'s checkpoints on ``sink`` until the run's events end.

    Any workflow's run writes checkpoints, so ``recover`` shows them for runs
    that are not the demo's too.
    """
    async for event in handle.events(emits=False):
        if event.name == "checkpoint_saved":
            sink.checkpoint_written(str(event.get("snapshot_id", "")))
