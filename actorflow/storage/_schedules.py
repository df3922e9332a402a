"""Schedules as a store keeps them: a definition the user writes, progress workers write.

A :class:`Schedule` is what ``Runtime.schedule`` declared (what to run, and
when); a :class:`ScheduleProgress` is the newest tick a worker started. They
are separate objects so neither writer ever overwrites the other's change (a
pause is never undone by a worker's progress): progress is only a hint of
where to look from, since a tick's run is created with ``create_run`` under
an id derived from the schedule and the tick, which only one creator wins.
Both are sealed like manifests (encrypted in an encrypted store).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Literal

import msgspec

from actorflow._log import get_logger
from actorflow._text import describe
from actorflow.errors import ConfigurationError, CorruptedDataError
from actorflow.storage._envelope import Kind
from actorflow.storage._protocol import UnreadableEntry

if TYPE_CHECKING:
    from actorflow.errors import EncryptionKeyError
    from actorflow.storage._sealing import Codec

__all__ = [
    "CatchUp",
    "Schedule",
    "ScheduleProgress",
    "SkippedSchedules",
    "dump_progress",
    "dump_schedule",
    "load_progress",
    "load_schedule",
    "validate_schedule_id",
]

CatchUp = Literal["skip", "latest", "all"]

_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")


def validate_schedule_id(schedule_id: object) -> str:
    """``schedule_id`` if it can name a schedule (and prefix its runs' ids).

    Raises:
        ConfigurationError: not 1-64 letters, digits, ``-`` or ``_``.
    """
    if not isinstance(schedule_id, str) or not _ID.fullmatch(schedule_id):
        raise ConfigurationError("schedule_id", schedule_id, "1-64 letters, digits, '-' or '_'")
    return schedule_id


class Schedule(msgspec.Struct, frozen=True, kw_only=True, tag_field="tag", tag="schedule"):
    """A schedule: which workflow to start, on what input, at which ticks.

    Attributes:
        schedule_id: its name; a tick's run id is ``sched-<id>-<tick>``.
        workflow: the workflow's registry name.
        workflow_module: the module that defines it (``None``: ``__main__``).
        input: MessagePack bytes of the input each run gets.
        cron: a five-field cron expression, or ``None`` with ``every``.
        every: seconds between ticks, counted from ``anchor``.
        timezone: the IANA zone the cron expression is read in.
        catch_up: which ticks missed while no worker ran are started:
            ``skip`` (none), ``latest`` (the newest) or ``all``.
        anchor: when the schedule was first declared (``time.time()``);
            no tick before it is started.
        paused: whether workers leave it alone.
        code_version: the ``code_version`` of the runtime that declared it.

    .. versionadded:: 0.6
    """

    schedule_id: str
    workflow: str
    workflow_module: str | None = None
    input: bytes = b""
    cron: str | None = None
    every: float | None = None
    timezone: str = "UTC"
    catch_up: CatchUp = "skip"
    anchor: float = 0.0
    paused: bool = False
    code_version: str | None = None


class ScheduleProgress(
    msgspec.Struct, frozen=True, kw_only=True, tag_field="tag", tag="schedule_progress"
):
    """The newest tick a worker started a run for, and that run's id.

    .. versionadded:: 0.6
    """

    schedule_id: str
    last_tick: float
    last_run: str


def _place(schedule_id: str) -> str:
    return f"schedule.{schedule_id}"


def dump_schedule(codec: Codec, schedule: Schedule) -> bytes:
    """Encode and seal a schedule."""
    data = msgspec.msgpack.encode(schedule)
    return codec.seal(
        data, kind=Kind.MANIFEST, run_id=_place(schedule.schedule_id), slot="schedule"
    )


def load_schedule(codec: Codec, data: bytes, *, schedule_id: str, location: str) -> Schedule:
    """Open and decode a schedule.

    Raises:
        CorruptedDataError: damaged, or not this schedule.
        EncryptionKeyError: sealed with a key the codec lacks.
    """
    raw = codec.open(
        data, kind=Kind.MANIFEST, run_id=_place(schedule_id), slot="schedule", location=location
    )
    try:
        schedule = msgspec.msgpack.decode(raw, type=Schedule)
    except msgspec.DecodeError as exc:
        raise CorruptedDataError(location, f"not a schedule ({exc})") from exc
    if schedule.schedule_id != schedule_id:
        raise CorruptedDataError(location, f"holds schedule {schedule.schedule_id!r}")
    return schedule


def dump_progress(codec: Codec, progress: ScheduleProgress) -> bytes:
    """Encode and seal a schedule's progress."""
    data = msgspec.msgpack.encode(progress)
    return codec.seal(
        data, kind=Kind.MANIFEST, run_id=_place(progress.schedule_id), slot="progress"
    )


def load_progress(
    codec: Codec, data: bytes, *, schedule_id: str, location: str
) -> ScheduleProgress:
    """Open and decode a schedule's progress.

    Raises:
        CorruptedDataError: damaged, or not this schedule's.
        EncryptionKeyError: sealed with a key the codec lacks.
    """
    raw = codec.open(
        data, kind=Kind.MANIFEST, run_id=_place(schedule_id), slot="progress", location=location
    )
    try:
        progress = msgspec.msgpack.decode(raw, type=ScheduleProgress)
    except msgspec.DecodeError as exc:
        raise CorruptedDataError(location, f"not a schedule's progress ({exc})") from exc
    if progress.schedule_id != schedule_id:
        raise CorruptedDataError(location, f"holds schedule {progress.schedule_id!r}")
    return progress


_log = get_logger("actorflow.storage")


class SkippedSchedules:
    """Schedule definitions a store's listing skips: each told once, the damaged ones named.

    A worker lists the schedules at every poll: one warning per schedule while
    it stays unreadable, not one per poll. A damaged definition is an
    :class:`UnreadableEntry` (``actorflow validate`` names it); one sealed with
    a key the store was not given is sound, and only warned about.
    """

    def __init__(self) -> None:
        self._told: set[str] = set()

    def read(self, schedule_id: str) -> None:
        """``schedule_id`` read well: told again if it is damaged later."""
        self._told.discard(schedule_id)

    def skip(
        self, schedule_id: str, exc: CorruptedDataError | EncryptionKeyError
    ) -> UnreadableEntry | None:
        """``schedule_id``'s definition cannot be read: what to name, if it is damaged."""
        if schedule_id not in self._told:
            self._told.add(schedule_id)
            _log.warning("schedule_unreadable", schedule_id=schedule_id, error=describe(exc))
        if not isinstance(exc, CorruptedDataError):
            return None
        return UnreadableEntry(
            location=exc.location,
            schedule_id=schedule_id,
            problem=f"the schedule's definition is corrupt ({exc.cause_text}), so no worker "
            "starts its ticks; declare it again (runtime.schedule with the same schedule_id "
            "replaces it) or delete it",
        )
