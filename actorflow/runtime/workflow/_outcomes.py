"""A run as its manifest holds it: the orchestrator's signature, new, taken over, finished.

Also the format of the record that ends a finished run's log (``RunEnd``),
which the replayed view reads too; deciding how an attempt ends and storing
it is ``_ending``'s.
"""

from __future__ import annotations

import hashlib
import time
import typing
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

import msgspec

from actorflow._text import cap
from actorflow.errors import (
    ActorDefinitionError,
    CorruptedDataError,
    RunBlockedError,
    RunFailedError,
    RunInputTypeError,
    RunNotFinishedError,
    RunPaused,
)
from actorflow.runtime.actors import class_name, lookup, module_of
from actorflow.storage import ErrorInfo, EventRecord, RunManifest, RunStatus
from actorflow.storage import decode_value as decode
from actorflow.storage import encode_value as encode

__all__ = [
    "END_EVENT",
    "KEPT_RECOVERY_ERRORS",
    "RunEnd",
    "Workflow",
    "decode_result",
    "end_record",
    "finished_error",
    "new_manifest",
    "progressed",
    "recorded_end",
    "recovery_failed",
    "run_signature",
    "stored_result",
    "taken",
    "workflow_class",
]

if TYPE_CHECKING:
    from collections.abc import Awaitable

R_co = TypeVar("R_co", covariant=True)


class Workflow(Protocol[R_co]):
    """A workflow class's instances, as type checkers see them: ``run`` gives an ``R_co``.

    What ``Runtime.run``/``start`` read a workflow's result type from.
    """

    def run(self, ctx: Any, input: Any, /) -> Awaitable[R_co]:
        """The workflow's body: ``async def run(self, ctx, input) -> R``."""
        ...


KEPT_RECOVERY_ERRORS = 10
"""How many causes of failed recovery attempts a manifest keeps (the newest)."""
_CAUSE_CHARS = 1000


_signatures: dict[type[Any], tuple[Any, Any]] = {}


def run_signature(cls: type[Any]) -> tuple[Any, Any]:
    """``(input type, result type)`` of an orchestrator class's ``run(ctx, input)``.

    Resolved once per class: resolving string annotations costs an eval each.
    """
    found = _signatures.get(cls)
    if found is None:
        found = _signatures[cls] = _resolve_signature(cls)
    return found


def _resolve_signature(cls: type[Any]) -> tuple[Any, Any]:
    fn = getattr(cls, "run", None)
    if fn is None or not callable(fn):
        raise ActorDefinitionError(
            cls.__qualname__, "an orchestrator needs `async def run(self, ctx, input)`"
        )
    try:
        hints = typing.get_type_hints(fn)
    except Exception:
        hints = {}
    names = [n for n in fn.__code__.co_varnames[: fn.__code__.co_argcount]]
    input_type = hints.get(names[2], Any) if len(names) > 2 else Any
    return input_type, hints.get("return", Any)


def new_manifest(
    workflow: type[Any], input: Any, *, run_id: str, owner: str | None, code_version: str | None
) -> RunManifest:
    """The manifest of a run about to start: already running, owned by ``owner``.

    Raises:
        EncodingError: ``input`` cannot be encoded.
        RunInputTypeError: ``input`` does not decode as the workflow's input type
            (what its every attempt would do): refused before anything is stored.
    """
    data = encode(input, "workflow input")
    input_type = run_signature(workflow)[0]
    if input_type is not Any:
        try:
            decode(data, input_type, "workflow input")
        except CorruptedDataError as exc:
            raise RunInputTypeError(
                run_id,
                class_name(workflow),
                _type_label(input_type),
                _type_label(type(input)),
                str(exc.__cause__ or exc),
            ) from None
    now = time.time()
    return RunManifest(
        run_id=run_id,
        workflow=class_name(workflow),
        workflow_module=module_of(workflow),
        input=data,
        input_hash=hashlib.sha256(data).hexdigest(),
        code_version=code_version,
        created=now,
        updated=now,
        owner=owner,
    )


def _type_label(t: object) -> str:
    """``t`` as a user wrote it: ``Report``, ``list[str]``, ``int | None``."""
    if isinstance(t, type) and not typing.get_args(t):
        return t.__qualname__
    return repr(t).replace("typing.", "")


def taken(m: RunManifest, *, owner: str, limit: int | None, unblock: bool = False) -> RunManifest:
    """``m`` as taken over by ``owner``: one write for status, owner and attempt.

    With ``limit`` (a recovery) the attempt counts; once more than ``limit``
    attempts in a row made no progress (see :func:`progressed`), the run is
    marked failed instead. A run that is no longer an orphan (it finished or
    paused meanwhile) comes back unchanged: it must never run again. With
    ``unblock`` a blocked run is taken too, its divergence cleared; that
    counts no attempt (new code is tried, nothing crashed).
    """
    now = time.time()
    if m.status is RunStatus.BLOCKED and unblock:
        return msgspec.structs.replace(
            m,
            status=RunStatus.RUNNING,
            owner=owner,
            error=None,
            blocked_code_version=None,
            updated=now,
        )
    if m.status is RunStatus.QUEUED:  # its first start: nothing crashed, no attempt counts
        return msgspec.structs.replace(m, status=RunStatus.RUNNING, owner=owner, updated=now)
    if m.status not in (RunStatus.RUNNING, RunStatus.INTERRUPTED):
        return m
    if limit is None:
        return msgspec.structs.replace(m, status=RunStatus.RUNNING, owner=owner, updated=now)
    attempt = m.attempt + 1
    # only the attempts since the last one that made progress count: a run
    # that moves on at every attempt is never failed for crashing often
    in_a_row = attempt - min(m.progressed_attempt, m.attempt)
    if in_a_row > limit:
        reason = (
            f"{in_a_row - 1} recovery attempts failed in a row, none making progress "
            f"(max_recovery_attempts={limit})"
        )
        if m.recovery_errors:
            last = m.recovery_errors[-1]
            reason += f"; the last with {last.type}: {cap(last.message, _CAUSE_CHARS)}"
        error = ErrorInfo(type="RecoveryFailedError", message=reason)
        return msgspec.structs.replace(
            m, attempt=attempt, status=RunStatus.FAILED, error=error, owner=None, updated=now
        )
    return msgspec.structs.replace(
        m, attempt=attempt, status=RunStatus.RUNNING, owner=owner, updated=now
    )


def progressed(m: RunManifest, *, attempt: int) -> RunManifest:
    """``m`` noting that recovery ``attempt`` made progress: a record of its own is durable.

    Progress resets the count that ``max_recovery_attempts`` bounds. An
    attempt another owner has replaced since changes nothing.
    """
    if m.attempt != attempt or m.progressed_attempt >= attempt:
        return m
    return msgspec.structs.replace(m, progressed_attempt=attempt, updated=time.time())


def left_for_newer(m: RunManifest) -> RunManifest:
    """``m`` let go by a process too old to read it: interrupted again, its attempt refunded."""
    if m.status is not RunStatus.RUNNING:
        return m
    return msgspec.structs.replace(
        m,
        status=RunStatus.INTERRUPTED,
        owner=None,
        attempt=max(0, m.attempt - 1),
        progressed_attempt=min(m.progressed_attempt, max(0, m.attempt - 1)),
        updated=time.time(),
    )


def recovery_failed(m: RunManifest, *, cause: ErrorInfo) -> RunManifest:
    """``m`` with ``cause`` kept among the causes of its failed recovery attempts.

    The run stays as it is, for a later ``recover()``; the newest causes are
    kept so that the error of a run that used up ``max_recovery_attempts``
    can say why.
    """
    errors = (*m.recovery_errors, cause)[-KEPT_RECOVERY_ERRORS:]
    return msgspec.structs.replace(m, recovery_errors=errors, updated=time.time())


def workflow_class(manifest: RunManifest) -> type[Any]:
    """The class of ``manifest``'s workflow, imported from its recorded module if need be.

    Raises:
        RegistryError: it is not defined here and its module cannot give it.
    """
    return lookup(manifest.workflow, manifest.workflow_module)


def decode_result(manifest: RunManifest, workflow: type[Any] | None = None) -> Any:
    """A completed run's result, typed by its orchestrator's ``run`` when the class is known."""
    if workflow is None:
        try:
            workflow = workflow_class(manifest)
        except LookupError:
            workflow = None
    result_type = run_signature(workflow)[1] if workflow is not None else Any
    return decode(manifest.result or b"\xc0", result_type, f"result of run {manifest.run_id}")


def finished_error(manifest: RunManifest) -> BaseException:
    """What waiting on a run that is not completed raises: paused, failed, blocked, not finished."""
    run_id = manifest.run_id
    if manifest.status is RunStatus.PAUSED:
        return RunPaused(run_id, manifest.prompt or "", manifest.deadline)
    if manifest.status is RunStatus.BLOCKED:
        error = manifest.error
        return RunBlockedError(
            run_id,
            error.type if error else "NonDeterminismError",
            error.message if error else "its code no longer replays its log",
            manifest.blocked_code_version,
        )
    if manifest.status in (RunStatus.FAILED, RunStatus.CANCELLED):
        error = manifest.error
        return RunFailedError(
            run_id,
            error.type if error else str(manifest.status),
            error.message if error else f"the run was {manifest.status}",
        )
    return RunNotFinishedError(run_id, str(manifest.status))


def stored_result(manifest: RunManifest) -> Any:
    """A stored run's result, decoded to its orchestrator's return type (``Runtime.result``).

    Raises:
        RunNotFinishedError: it has no result yet (queued, running, interrupted or paused).
        RunBlockedError: it is blocked: its code no longer replays its log.
        RunFailedError: it failed or was cancelled (with the cause).
    """
    if manifest.status is RunStatus.COMPLETED:
        return decode_result(manifest)
    if manifest.status is RunStatus.PAUSED:
        raise RunNotFinishedError(manifest.run_id, "paused")
    raise finished_error(manifest)


END_EVENT = "run_end"
"""The kind of the event record that ends a finished run's log."""


class RunEnd(msgspec.Struct, frozen=True, kw_only=True):
    """How a run finished, as the last record of its log holds it.

    The log is the truth; the manifest's status and result are a cache of
    this record, written after it without a sync of their own and repaired
    from it by ``recover()`` if a power loss took them.
    """

    status: RunStatus
    result: bytes | None = None
    error: ErrorInfo | None = None


_end_decoder = msgspec.msgpack.Decoder(RunEnd)


def end_record(end: RunEnd) -> EventRecord:
    """The log record of a finished run's end (an event: older readers show it as one)."""
    return EventRecord(kind=END_EVENT, data=msgspec.msgpack.encode(end), time=time.time())


def recorded_end(run_id: str, events: typing.Mapping[str, EventRecord]) -> RunEnd | None:
    """The end a run's log recorded (from a view's events), if it finished.

    Raises:
        CorruptedDataError: the record is there but does not decode.
    """
    record = events.get(END_EVENT)
    if record is None or record.data is None:
        return None
    try:
        return _end_decoder.decode(record.data)
    except msgspec.DecodeError as exc:
        raise CorruptedDataError(f"the end record of run {run_id!r}", str(exc)) from exc
