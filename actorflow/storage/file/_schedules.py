"""A file store's schedules: ``.schedules/<id>.schedule`` and ``<id>.progress`` beside it.

Each is replaced whole by an atomic write (temp file, rename), so a reader
sees the old one or the new one. Definitions are written durably (the user
declared them); progress is not (a power loss that takes it costs a worker
one ``create_run`` that finds the tick's run). The folder's name starts with
a dot, so it is never read as a run. Every method blocks: the store calls
them from worker threads.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, TypeAlias

from actorflow._log import get_logger
from actorflow._text import describe
from actorflow.errors import CorruptedDataError, EncryptionKeyError, ScheduleNotFoundError
from actorflow.storage._schedules import (
    SkippedSchedules,
    dump_progress,
    dump_schedule,
    load_progress,
    load_schedule,
    validate_schedule_id,
)
from actorflow.storage.file._fs import TEMP_PREFIX, write_atomic

if TYPE_CHECKING:
    from actorflow.storage._protocol import UnreadableEntry
    from actorflow.storage._schedules import Schedule, ScheduleProgress
    from actorflow.storage._sealing import Codec
    from actorflow.storage.file._fs import FileSystem

__all__ = ["SCHEDULE_FOLDER", "ScheduleFiles"]

SCHEDULE_FOLDER = ".schedules"
_DEFINITION = ".schedule"
_PROGRESS = ".progress"

_log = get_logger("actorflow.storage")

# module-level: in the class, `list` names its method
_Found: TypeAlias = "list[Schedule]"
_Damaged: TypeAlias = "list[UnreadableEntry]"


class ScheduleFiles:
    """The schedule files under ``root/.schedules``."""

    def __init__(self, fs: FileSystem, root: str, codec: Codec) -> None:
        self._fs = fs
        self._folder = os.path.join(root, SCHEDULE_FOLDER)
        self._codec = codec
        self._skipped = SkippedSchedules()

    def _path(self, schedule_id: str, suffix: str) -> str:
        return os.path.join(self._folder, validate_schedule_id(schedule_id) + suffix)

    def put(self, schedule: Schedule) -> None:
        """Write the definition, durably."""
        self._fs.makedirs(self._folder)
        path = self._path(schedule.schedule_id, _DEFINITION)
        write_atomic(self._fs, path, dump_schedule(self._codec, schedule))

    def read(self, schedule_id: str) -> Schedule:
        """The definition.

        Raises:
            ScheduleNotFoundError: none.
        """
        path = self._path(schedule_id, _DEFINITION)
        try:
            data = self._fs.read(path)
        except FileNotFoundError:
            raise ScheduleNotFoundError(schedule_id) from None
        return load_schedule(self._codec, data, schedule_id=schedule_id, location=path)

    def list(self) -> list[Schedule]:
        """Every definition that can be read, by id."""
        return self._scan()[0]

    def damaged(self) -> _Damaged:
        """The definitions that are damaged (what :meth:`list` skips, sealed ones aside)."""
        return self._scan()[1]

    def _scan(self) -> tuple[_Found, _Damaged]:
        damaged: list[UnreadableEntry] = []
        try:
            names = self._fs.listdir(self._folder)
        except FileNotFoundError:
            return [], []
        found = []
        for name in sorted(names):
            if name.startswith(TEMP_PREFIX) or not name.endswith(_DEFINITION):
                continue
            schedule_id = name.removesuffix(_DEFINITION)
            try:
                found.append(self.read(schedule_id))
            except ScheduleNotFoundError:
                continue  # deleted meanwhile
            except (CorruptedDataError, EncryptionKeyError) as exc:
                entry = self._skipped.skip(schedule_id, exc)
                damaged += [entry] if entry else []
            else:
                self._skipped.read(schedule_id)
        return found, damaged

    def delete(self, schedule_id: str) -> None:
        """Remove the definition and its progress.

        Raises:
            ScheduleNotFoundError: no definition.
        """
        path = self._path(schedule_id, _DEFINITION)
        if not self._fs.exists(path):
            raise ScheduleNotFoundError(schedule_id)
        self._fs.unlink(path)  # the file layer's unlink takes a missing file as removed
        self._fs.unlink(self._path(schedule_id, _PROGRESS))

    def put_progress(self, progress: ScheduleProgress) -> None:
        """Write the progress (not synced: see the module's docstring)."""
        self._fs.makedirs(self._folder)
        path = self._path(progress.schedule_id, _PROGRESS)
        write_atomic(self._fs, path, dump_progress(self._codec, progress), durable=False)

    def read_progress(self, schedule_id: str) -> ScheduleProgress | None:
        """The progress, or ``None`` if there is none or it cannot be read."""
        path = self._path(schedule_id, _PROGRESS)
        try:
            data = self._fs.read(path)
            return load_progress(self._codec, data, schedule_id=schedule_id, location=path)
        except FileNotFoundError:
            return None
        except (CorruptedDataError, EncryptionKeyError) as exc:
            # only a hint: without it a worker looks from the schedule's anchor
            _log.warning(
                "schedule_progress_unreadable", schedule_id=schedule_id, error=describe(exc)
            )
            return None
