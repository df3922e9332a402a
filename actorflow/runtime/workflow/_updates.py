"""Updates: a signal that waits for the run's reply (``runtime.update`` and ``@update``).

The caller posts the update to the run's inbox (an ``update`` entry, see
``_inbox.py``: its id is made from the caller's ``update_id``, so a retried
call adds nothing) and reads the inbox for the reply, which the run's owner
posts as a ``reply`` entry. The owner (``UpdateRunner``, fed by the run's
``SignalDesk``) validates the update first; a refusal is recorded as the
update's outcome like any other, so it is final: no later attempt validates
it again. An accepted update runs the orchestrator's ``@update`` method as
steps in the namespace ``update/<seq>``, and its outcome is recorded as the
step ``update/<seq>`` (which also marks the inbox entry taken). A reply is
posted only once that record is durable. A recovery posts the replies of
finished updates whose reply is not in the inbox (the desk saw every reply
in its one read) and runs again those a crash cut off, their recorded steps
replayed. When the run ends, updates without a reply fail at the caller
with ``RunFinishedError``; a retry of an update whose reply is in the
inbox gets that reply, even after the run ended.
"""

from __future__ import annotations

import time
import uuid
from typing import TYPE_CHECKING, Any

import anyio
import msgspec
import structlog

from actorflow._text import error_message
from actorflow.errors import (
    RunFinishedError,
    StorageError,
    UpdateFailedError,
    UpdateRejectedError,
)
from actorflow.runtime.workflow._ids import Namespace, enter_namespace, leave_namespace
from actorflow.runtime.workflow._inbox import (
    InboxKind,
    classify,
    encode_message,
    find_posted,
    post,
    reply_id,
    update_id_of,
    update_type_of,
)
from actorflow.runtime.workflow._update_handlers import UpdateSpec, update_handlers
from actorflow.runtime.workflow._wait_records import signal_type
from actorflow.runtime.workflow.steps import close_namespace, step_record
from actorflow.storage import (
    ErrorInfo,
    EventRecord,
    InboxEntry,
    read_messages,
)
from actorflow.storage import decode_value as decode
from actorflow.storage import encode_value as encode

if TYPE_CHECKING:
    from anyio.abc import TaskGroup

    from actorflow.runtime.workflow._context import RunContext
    from actorflow.runtime.workflow._env import StepEnv
    from actorflow.storage import Store

__all__ = ["UpdateOutcome", "UpdateRunner", "call_update"]

_log = structlog.get_logger("actorflow.updates")


class UpdateOutcome(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """An update's reply, as recorded (step ``update/<seq>``) and as posted back.

    ``rejected``: the validator refused it, or the run has no handler for it.
    """

    seq: int
    update_id: str
    result: bytes | None = None
    error: ErrorInfo | None = None
    rejected: bool = False


async def call_update(
    store: Store,
    run_id: str,
    message: object,
    *,
    update_id: str | None,
    sender: str | None,
    poll_interval: float,
    max_size: int | None = None,
    result_type: Any = Any,
) -> Any:
    """Post an update and wait for the run's reply; return the reply decoded as ``result_type``.

    Raises:
        RunNotFoundError: no such run.
        RunFinishedError: the run has ended (before or while waiting for the reply).
        UpdateRejectedError: the run's validator refused it, or it has no handler for it.
        UpdateFailedError: the handler raised.
        SignalTooLargeError: ``message`` encodes to more than ``max_size`` bytes.
        EncodingError: ``message`` cannot be encoded.
    """
    payload = encode_message(run_id, message, "update", max_size)
    manifest = await store.read_run(run_id)
    if manifest.status.finished:
        # a retry of an update answered before the end gets that answer
        found = None
        if update_id is not None:
            found = await find_posted(store, run_id, InboxKind.REPLY, key=update_id)
        if found is None:
            raise RunFinishedError(run_id, str(manifest.status), "an update")
        return _answer(run_id, found, result_type)
    update_id = update_id if update_id is not None else uuid.uuid4().hex
    posted = await post(
        store,
        run_id,
        InboxKind.UPDATE,
        name=signal_type(type(message)),
        key=update_id,
        payload=payload,
        sender=sender,
    )
    cursor = posted.seq + 1
    answer = reply_id(update_id)
    while True:
        ended = (await store.read_run(run_id)).status
        for entry in await read_messages(store, run_id, cursor):
            cursor = entry.seq + 1
            if entry.entry_id == answer and classify(entry) is InboxKind.REPLY:
                return _answer(run_id, entry, result_type)
        if ended.finished:  # read after its status: a reply posted before the end is seen
            raise RunFinishedError(run_id, str(ended), "an update")
        await anyio.sleep(poll_interval)


def _answer(run_id: str, entry: InboxEntry, result_type: Any) -> Any:
    outcome = decode(entry.payload, UpdateOutcome, "update reply", str(entry.seq))
    if outcome.rejected:
        reason = outcome.error.message if outcome.error else "rejected"
        raise UpdateRejectedError(run_id, outcome.update_id, reason)
    if outcome.error is not None:
        raise UpdateFailedError(
            run_id, outcome.update_id, outcome.error.type, outcome.error.message
        )
    return decode(outcome.result or b"\xc0", result_type, "update reply", outcome.update_id)


class UpdateRunner:
    """The owner's side: validates, runs and answers the run's updates, each once."""

    def __init__(self, env: StepEnv, ctx: RunContext, task_group: TaskGroup) -> None:
        self._env = env
        self._ctx = ctx
        self._task_group = task_group
        self._orchestrator: object | None = None
        self._waiting: list[InboxEntry] = []
        self._offered: set[int] = set()
        self._running: set[anyio.CancelScope] = set()
        self._stopped = False

    def attach(self, orchestrator: object) -> None:
        """The run's orchestrator, once built: updates offered before now are taken up."""
        self._orchestrator = orchestrator
        waiting, self._waiting = self._waiting, []
        for entry in waiting:
            self.offer(entry)

    def offer(self, entry: InboxEntry, replied: bool = False) -> None:
        """An update in the inbox (each ``seq`` is handled once per attempt).

        One whose reply is in the inbox (``replied``) was answered or refused
        for good: there is nothing left to do for it.
        """
        if self._stopped or entry.seq in self._offered:
            return
        if replied:
            self._offered.add(entry.seq)
            return
        if self._orchestrator is None:
            self._waiting.append(entry)
            return
        self._offered.add(entry.seq)
        self._task_group.start_soon(self._handle, entry)

    def stop(self) -> None:
        """The run ended: updates still running are cut off (their callers hear it ended)."""
        self._stopped = True
        for scope in self._running:
            scope.cancel()

    async def _handle(self, entry: InboxEntry) -> None:
        with anyio.CancelScope() as scope:
            self._running.add(scope)
            try:
                await self._take(entry)
            except StorageError as exc:
                # the run's own records fail it; this update's caller waits on
                _log.warning("update_not_answered", seq=entry.seq, error=error_message(exc))
            finally:
                self._running.discard(scope)

    async def _take(self, entry: InboxEntry) -> None:
        env = self._env
        issued = time.time()
        step_id = f"update/{entry.seq}"
        update_id = update_id_of(entry)
        recorded = env.view.steps.get(step_id)
        if recorded is not None:  # finished before a crash: its reply may not have been posted
            await self._reply(update_id, recorded.result or b"\xc0")
            return
        spec, message, refusal = self._accept(entry)
        if spec is None:
            # recorded like any outcome: a refusal is final, never validated again
            outcome = UpdateOutcome(
                seq=entry.seq,
                update_id=update_id,
                error=ErrorInfo(type="UpdateRejectedError", message=refusal),
                rejected=True,
            )
            await self._finish(step_id, update_id, encode(outcome, "update reply"), issued)
            return
        if step_id not in env.view.events:
            env.recorder.record(
                EventRecord(kind="update_accepted", step_id=step_id, time=time.time())
            )
        ns = Namespace(step_id)
        token = enter_namespace(ns)
        try:
            result = await spec.fn(self._orchestrator, self._ctx, message)
            await close_namespace(env, ns)
            outcome = UpdateOutcome(
                seq=entry.seq,
                update_id=update_id,
                result=encode(result, f"reply of update {update_id!r}"),
            )
        except Exception as exc:
            outcome = UpdateOutcome(seq=entry.seq, update_id=update_id, error=ErrorInfo.of(exc))
        finally:
            leave_namespace(token)
        await self._finish(step_id, update_id, encode(outcome, "update reply"), issued)

    async def _finish(self, step_id: str, update_id: str, data: bytes, issued: float) -> None:
        """Record the update's outcome (taken up at ``issued``), then post it as the reply."""
        recorder = self._env.recorder
        if self._env.trace is not None:
            self._env.trace.update(step_id, issued)
        recorder.record(
            step_record(step_id, "update", issued=issued, result=data, run_attempt=recorder.attempt)
        )
        # the reply is an output: what it says must survive a crash first
        with anyio.CancelScope(shield=True):
            await recorder.flush()
            await self._reply(update_id, data)

    def _accept(self, entry: InboxEntry) -> tuple[UpdateSpec | None, object, str]:
        """The handler and the decoded message, or why the update is refused."""
        kind = update_type_of(entry)
        orchestrator = self._orchestrator
        handlers = update_handlers(type(orchestrator), signal_type)
        spec = handlers.get(kind)
        if spec is None:
            known = ", ".join(sorted(handlers)) or "none"
            return None, None, f"the workflow has no @update handler for {kind} (it has: {known})"
        try:
            message = decode(entry.payload, spec.message_type, "update", str(entry.seq))
        except Exception as exc:
            return None, None, f"the update does not decode as {kind}: {error_message(exc)}"
        if spec.validator is not None:
            try:
                spec.validator(orchestrator, message)
            except Exception as exc:
                return None, None, f"{type(exc).__name__}: {error_message(exc)}"
        return spec, message, ""

    async def _reply(self, update_id: str, data: bytes) -> None:
        store = self._env.recorder.store
        await post(store, self._env.run_id, InboxKind.REPLY, key=update_id, payload=data)
