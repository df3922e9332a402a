"""Exported run histories (``.afh``): portable, self-checking, optionally redacted.

A history file is one MessagePack map, ``HistoryFile``: a header (the format's
name and version, the actorflow that wrote it, a SHA-256 of the body) and the
body, the MessagePack of a ``RunHistory`` (the run's manifest, its newest
usable snapshot with its history chunks inline, the log after it, its agents'
state blobs, the inbox entries it took). Nothing in it is sealed: a sealed
store's data is decrypted as it is read.

Redacting blanks every payload (step results and messages, phase results,
agents' states, milestones, inbox payloads, the run's result): each keeps its shape
(maps, lists, numbers, booleans, nil) with every string and byte string
emptied; decision texts and error messages become ``(redacted)``. What replay
checks is kept: each step's kind, target and argument hash, decisions'
types, ``ctx.patched`` markers, the run's input.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import os
from typing import TYPE_CHECKING

import msgspec

from actorflow._files import read_regular_file
from actorflow.errors import (
    HistoryFileCorruptedError,
    HistoryFileNewerError,
    HistoryFileTruncatedError,
)
from actorflow.runtime.workflow._replayer import RunHistory
from actorflow.storage import (
    AgentSnapshot,
    DecisionRecord,
    ErrorInfo,
    EventRecord,
    LogRecord,
    MessageRef,
    MilestoneRecord,
    PhaseEndRecord,
    Snapshot,
    StateRef,
    StepRecord,
)

if TYPE_CHECKING:
    from os import PathLike

__all__ = [
    "FORMAT",
    "FORMAT_VERSION",
    "MAX_HISTORY_FILE_BYTES",
    "REDACTED",
    "HistoryFile",
    "blank",
    "decode_history",
    "encode_history",
    "read_history_file",
    "redact",
    "write_history_file",
]

FORMAT = "actorflow-history"
"""The ``format`` a history file's header names."""
FORMAT_VERSION = 1
"""The newest history format version this actorflow writes and reads."""
MAX_HISTORY_FILE_BYTES = 4 << 30
"""The largest history file read: a bound, so that a device is never read as one."""
REDACTED = b"\xc0"
"""What a payload that is not MessagePack becomes when redacted: MessagePack ``nil``."""


def _version() -> str:
    """This actorflow's version, as installed (the package's own name may be shadowed)."""
    try:
        return importlib.metadata.version("actorflow")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


class HistoryFile(msgspec.Struct, frozen=True, kw_only=True):
    """A history file as stored: its header, then its body (a ``RunHistory``'s MessagePack).

    Attributes:
        format: always ``FORMAT``.
        version: the format version it was written in.
        actorflow: the version of the actorflow that wrote it.
        sha256: the hex SHA-256 of ``body``.
        run_id: the run it holds (readable without decoding the body).
        redacted: whether its payloads were replaced.
        body: the ``RunHistory``.
    """

    format: str
    version: int
    actorflow: str
    sha256: str
    run_id: str = ""
    redacted: bool = False
    body: bytes = b""


def encode_history(history: RunHistory) -> bytes:
    """The history file's bytes for ``history``."""
    body = msgspec.msgpack.encode(history)
    return msgspec.msgpack.encode(
        HistoryFile(
            format=FORMAT,
            version=FORMAT_VERSION,
            actorflow=_version(),
            sha256=hashlib.sha256(body).hexdigest(),
            run_id=history.run_id,
            redacted=history.redacted,
            body=body,
        )
    )


def decode_history(data: bytes, location: str = "history file") -> RunHistory:
    """The ``RunHistory`` a history file holds, its header and checksum checked.

    Raises:
        HistoryFileTruncatedError: the file ends early.
        HistoryFileCorruptedError: it fails its checksum, or is no history file.
        HistoryFileNewerError: a newer actorflow wrote it, in a newer format version.
    """
    try:
        outer = msgspec.msgpack.decode(data, type=HistoryFile)
    except msgspec.DecodeError as exc:
        if "truncated" in str(exc).lower():
            raise HistoryFileTruncatedError(location, str(exc)) from None
        raise HistoryFileCorruptedError(location, f"not a history file: {exc}") from None
    if outer.format != FORMAT:
        raise HistoryFileCorruptedError(location, f"its format is {outer.format!r}, not {FORMAT!r}")
    if outer.version > FORMAT_VERSION:
        raise HistoryFileNewerError(location, outer.version, FORMAT_VERSION, outer.actorflow)
    if hashlib.sha256(outer.body).hexdigest() != outer.sha256:
        raise HistoryFileCorruptedError(location, "its body fails its SHA-256 checksum")
    try:
        return msgspec.msgpack.decode(outer.body, type=RunHistory)
    except msgspec.DecodeError as exc:
        # it passed its checksum: written so by a newer actorflow of the same format version
        raise HistoryFileCorruptedError(location, f"its body does not decode: {exc}") from None


def write_history_file(history: RunHistory, path: str | PathLike[str]) -> None:
    """Write ``history`` to ``path`` (a temporary file renamed into place: never half-written)."""
    target = os.fspath(path)
    partial = f"{target}.partial"
    with open(partial, "wb") as f:
        f.write(encode_history(history))
    os.replace(partial, target)


def read_history_file(path: str | PathLike[str]) -> RunHistory:
    """The run history in the file at ``path`` (``actorflow export``'s ``.afh``).

    Raises:
        HistoryFileTruncatedError: the file ends early.
        HistoryFileCorruptedError: it fails its checksum, or is no history file.
        HistoryFileNewerError: a newer actorflow wrote it, in a newer format version.
        UnreadableFileError: a folder, FIFO or device, or over ``MAX_HISTORY_FILE_BYTES``.
        OSError: it cannot be read.
    """
    location = os.fspath(path)
    return decode_history(read_regular_file(location, limit=MAX_HISTORY_FILE_BYTES), location)


# --- redaction --------------------------------------------------------------------


def _blank_value(value: object) -> object:
    """``value`` with every string and byte string emptied; its shape and numbers kept."""
    if isinstance(value, str):
        return ""
    if isinstance(value, bytes | bytearray | memoryview):
        return b""
    if isinstance(value, list | tuple):
        return [_blank_value(v) for v in value]
    if isinstance(value, dict):
        # keys are a struct's field names: replies decode into their types again
        return {k: _blank_value(v) for k, v in value.items()}
    return value


def blank(data: bytes) -> bytes:
    """A payload redacted: the same MessagePack shape, its strings and bytes emptied."""
    try:
        return msgspec.msgpack.encode(_blank_value(msgspec.msgpack.decode(data)))
    except (msgspec.DecodeError, msgspec.EncodeError):
        return REDACTED


def _state(ref: StateRef | None) -> StateRef | None:
    if ref is None:
        return None
    return msgspec.structs.replace(
        ref, data=REDACTED if ref.data is None else blank(ref.data), blob=""
    )


def _message(ref: MessageRef | None) -> MessageRef | None:
    if ref is None:
        return None
    return msgspec.structs.replace(
        ref, data=REDACTED if ref.data is None else blank(ref.data), blob=""
    )


def _error(error: ErrorInfo | None) -> ErrorInfo | None:
    if error is None:
        return None
    return msgspec.structs.replace(error, message="(redacted)")


def _record(record: LogRecord) -> LogRecord:
    match record:
        case StepRecord():
            return msgspec.structs.replace(
                record,
                result=None if record.result is None else blank(record.result),
                error=_error(record.error),
                state=_state(record.state),
                message=_message(record.message),
            )
        case PhaseEndRecord():
            return msgspec.structs.replace(record, result=blank(record.result))
        case MilestoneRecord():
            return msgspec.structs.replace(record, data=blank(record.data))
        case DecisionRecord():
            return _decision(record)
        case EventRecord():
            if record.kind == "patch":
                return record  # a change id: replay checks it
            return msgspec.structs.replace(
                record, data=None if record.data is None else blank(record.data)
            )


def _decision(record: DecisionRecord) -> DecisionRecord:
    # its type is what replay checks; the words around it are the payload
    return msgspec.structs.replace(
        record, description="(redacted)", rationale="(redacted)", alternatives=()
    )


def _agent(agent: AgentSnapshot) -> AgentSnapshot:
    return msgspec.structs.replace(agent, state=_state(agent.state))


def _snapshot(snapshot: Snapshot) -> Snapshot:
    return msgspec.structs.replace(
        snapshot,
        agents={name: _agent(a) for name, a in snapshot.agents.items()},
        decisions=tuple(_decision(d) for d in snapshot.decisions),
        phases={
            pid: msgspec.structs.replace(p, result=blank(p.result))
            for pid, p in snapshot.phases.items()
        },
        steps=tuple(_record(s) for s in snapshot.steps),
        milestones=tuple(
            msgspec.structs.replace(m, data=blank(m.data)) for m in snapshot.milestones
        ),
        events=tuple(_record(e) for e in snapshot.events),
    )


def redact(history: RunHistory) -> RunHistory:
    """``history`` with its payloads blanked (``blank``); what replay checks kept."""
    manifest = history.manifest
    return msgspec.structs.replace(
        history,
        manifest=msgspec.structs.replace(
            manifest,
            result=None if manifest.result is None else blank(manifest.result),
            error=_error(manifest.error),
            prompt=None,
        ),
        snapshot=_snapshot(history.snapshot) if history.snapshot is not None else None,
        records=tuple(_record(r) for r in history.records),
        blobs={},
        inbox=tuple(msgspec.structs.replace(e, payload=blank(e.payload)) for e in history.inbox),
        redacted=True,
    )
