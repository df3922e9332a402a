"""An S3 store's schedules: ``schedules/<id>.schedule`` and ``<id>.progress`` beside ``runs/``.

Each object is replaced whole by one PUT (S3 never shows half an object),
so no write needs a condition: the user writes definitions, workers write
progress, and neither overwrites the other's object (see
``actorflow.storage._schedules``).
"""

from __future__ import annotations

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

if TYPE_CHECKING:
    from actorflow.storage._protocol import UnreadableEntry
    from actorflow.storage._schedules import Schedule, ScheduleProgress
    from actorflow.storage._sealing import Codec
    from actorflow.storage.s3._objects import S3Objects

__all__ = ["ScheduleObjects"]

_FOLDER = "schedules"
_DEFINITION = ".schedule"
_PROGRESS = ".progress"

_log = get_logger("actorflow.storage")

# module-level: in the class, `list` names its method
_Found: TypeAlias = "list[Schedule]"
_Damaged: TypeAlias = "list[UnreadableEntry]"


class ScheduleObjects:
    """The schedule objects under ``<prefix>schedules/``."""

    def __init__(self, objects: S3Objects, codec: Codec) -> None:
        self._objects = objects
        self._codec = codec
        self._root = objects.store_key(_FOLDER, "")
        self._skipped = SkippedSchedules()

    def _key(self, schedule_id: str, suffix: str) -> str:
        return self._root + validate_schedule_id(schedule_id) + suffix

    async def put(self, schedule: Schedule) -> None:
        """Write the definition."""
        key = self._key(schedule.schedule_id, _DEFINITION)
        await self._objects.overwrite("store schedule", key, dump_schedule(self._codec, schedule))

    async def read(self, schedule_id: str) -> Schedule:
        """The definition.

        Raises:
            ScheduleNotFoundError: none.
        """
        key = self._key(schedule_id, _DEFINITION)
        data = await self._objects.get_or_none("read schedule", key)
        if data is None:
            raise ScheduleNotFoundError(schedule_id)
        location = self._objects.location(key)
        return load_schedule(self._codec, data, schedule_id=schedule_id, location=location)

    async def list(self) -> list[Schedule]:
        """Every definition that can be read, by id."""
        return (await self._scan())[0]

    async def damaged(self) -> _Damaged:
        """The definitions that are damaged (what :meth:`list` skips, sealed ones aside)."""
        return (await self._scan())[1]

    async def _scan(self) -> tuple[_Found, _Damaged]:
        damaged: list[UnreadableEntry] = []
        found = []
        for info in await self._objects.list_objects("list schedules", self._root):
            name = info.key[len(self._root) :]
            if not name.endswith(_DEFINITION):
                continue
            schedule_id = name.removesuffix(_DEFINITION)
            try:
                found.append(await self.read(schedule_id))
            except ScheduleNotFoundError:
                continue  # deleted meanwhile
            except (CorruptedDataError, EncryptionKeyError) as exc:
                entry = self._skipped.skip(schedule_id, exc)
                damaged += [entry] if entry else []
            else:
                self._skipped.read(schedule_id)
        return found, damaged

    async def delete(self, schedule_id: str) -> None:
        """Remove the definition and its progress.

        Raises:
            ScheduleNotFoundError: no definition.
        """
        key = self._key(schedule_id, _DEFINITION)
        if await self._objects.head("read schedule", key) is None:
            raise ScheduleNotFoundError(schedule_id)
        await self._objects.delete("delete schedule", [key, self._key(schedule_id, _PROGRESS)])

    async def put_progress(self, progress: ScheduleProgress) -> None:
        """Write the progress."""
        key = self._key(progress.schedule_id, _PROGRESS)
        data = dump_progress(self._codec, progress)
        await self._objects.overwrite("store schedule progress", key, data)

    async def read_progress(self, schedule_id: str) -> ScheduleProgress | None:
        """The progress, or ``None`` if there is none or it cannot be read."""
        key = self._key(schedule_id, _PROGRESS)
        data = await self._objects.get_or_none("read schedule progress", key)
        if data is None:
            return None
        try:
            location = self._objects.location(key)
            return load_progress(self._codec, data, schedule_id=schedule_id, location=location)
        except (CorruptedDataError, EncryptionKeyError) as exc:
            # only a hint: without it a worker looks from the schedule's anchor
            _log.warning(
                "schedule_progress_unreadable", schedule_id=schedule_id, error=describe(exc)
            )
            return None
