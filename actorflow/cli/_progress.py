"""The live progress of the runs the CLI drives: phase, count, checkpoints written, elapsed.

Any workflow's run shows on the bar from its events (:func:`watch_progress`):
the phase it is in, and how many records its log holds as of its newest
checkpoint. A workflow running in the CLI's process may also report its own
phases with totals to the installed sink (:func:`progress`; the demo's
orchestrator does): none is installed by default, so such a workflow runs
silently in tests and under ``--app``.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import TYPE_CHECKING

from rich.progress import (
    BarColumn,
    Progress,
    ProgressColumn,
    SpinnerColumn,
    Task,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)
from rich.text import Text

if TYPE_CHECKING:
    from collections.abc import Iterator

    from rich.console import Console

    from actorflow.runtime import RunHandle

__all__ = [
    "ProgressSink",
    "RichProgress",
    "live_progress",
    "progress",
    "use_progress",
    "watch_progress",
]


class ProgressSink:
    """Receives a run's progress; this base class ignores it."""

    def phase(self, name: str, total: int | None = None, unit: str = "") -> None:
        """A phase the workflow reports started; ``total`` units (``unit``: files) follow."""

    def advance(self, count: int = 1) -> None:
        """``count`` more units of the current phase are done."""

    def checkpoint_written(self, checkpoint_id: str, position: int = 0) -> None:
        """The run wrote a checkpoint, as of log position ``position``."""

    def run_phase(self, name: str) -> None:
        """The run entered phase ``name`` (from its events, whatever the workflow)."""

    def replayed(self, steps: int) -> None:
        """Recovery replayed ``steps`` recorded steps."""


_current: ProgressSink = ProgressSink()


def progress() -> ProgressSink:
    """The installed sink (a silent one unless :func:`use_progress` installed another)."""
    return _current


@contextmanager
def use_progress(sink: ProgressSink) -> Iterator[ProgressSink]:
    """Install ``sink`` for workflows that report their own phases, while the block runs."""
    global _current
    previous, _current = _current, sink
    try:
        yield sink
    finally:
        _current = previous


class _Count(ProgressColumn):
    """``done/total unit``, or ``done unit`` while the total is unknown (never ``0/?``)."""

    def render(self, task: Task) -> Text:
        unit = task.fields.get("unit", "")
        if task.total is not None:
            return Text(f"{task.completed:.0f}/{task.total:.0f} {unit}".rstrip())
        return Text(f"{task.completed:.0f} {unit}" if unit else "")


class RichProgress(ProgressSink):
    """A rich progress bar: phase, done / total, checkpoints written, elapsed.

    A workflow that reports its phases (:meth:`phase`) shows them with their
    totals (the demo's: files, areas); for any other workflow, the phases come
    from its run's events and the count is the log records it had
    checkpointed (``records logged``).
    """

    def __init__(self, console: Console) -> None:
        self.checkpoints = 0
        self._own_phases = False  # the workflow reports its phases itself (the demo's does)
        self._logged = 0
        self.bar = Progress(
            SpinnerColumn(),
            TextColumn("[bold]{task.description:<9}"),
            BarColumn(),
            _Count(),
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

    def phase(self, name: str, total: int | None = None, unit: str = "") -> None:
        self._own_phases = True
        self._new_task(name, total=total, unit=unit)

    def _new_task(self, name: str, *, total: int | None, unit: str, done: int = 0) -> None:
        # A new task per phase: rich cannot turn a counted task back into a spinner.
        self.bar.remove_task(self.task)
        self.task = self.bar.add_task(
            name, total=total, completed=done, unit=unit, checkpoints=self.checkpoints
        )

    def run_phase(self, name: str) -> None:
        if not self._own_phases:
            self._new_task(name, total=None, unit="records logged", done=self._logged)

    def advance(self, count: int = 1) -> None:
        self.bar.advance(self.task, count)

    def checkpoint_written(self, checkpoint_id: str, position: int = 0) -> None:
        self.checkpoints += 1
        self.bar.update(self.task, checkpoints=self.checkpoints)
        if not self._own_phases and position > self._logged:
            self._logged = position
            self.bar.update(self.task, completed=position, unit="records logged")

    def replayed(self, steps: int) -> None:
        self.bar.console.print(f"replayed {steps} recorded step(s) from the log")


@contextmanager
def live_progress(console: Console | None) -> Iterator[ProgressSink]:
    """A progress bar on ``console``, installed for workflows that report; None: no display.

    Scripts get none: the CLI passes a console only when stderr is a terminal.
    """
    if console is None:
        with use_progress(ProgressSink()) as silent:
            yield silent
        return
    with RichProgress(console) as bar, use_progress(bar):
        yield bar


async def watch_progress(handle: RunHandle, sink: ProgressSink) -> None:
    """Show ``handle``'s phases and checkpoints on ``sink`` until the run's events end.

    Any workflow's run enters phases and writes checkpoints, so ``start`` and
    ``recover`` show them for runs that are not the demo's too.
    """
    async for event in handle.events(emits=False):
        if event.name == "checkpoint_saved":
            position = event.get("position", 0)
            sink.checkpoint_written(
                str(event.get("snapshot_id", "")), position if isinstance(position, int) else 0
            )
        elif event.name == "phase_started":
            sink.run_phase(str(event.get("phase", "")))
        elif event.name == "run_started":
            sink.run_phase("running")  # until its first phase, if it has any
