"""Updates: a signal that waits for the run's reply (``runtime.update`` and ``@update``).

The caller posts the update to the run's inbox (type ``actorflow.update/<type>``,
entry id ``update:<update_id>``, so a retried call adds nothing) and reads the
inbox for the reply, which the run's owner posts as an entry of its own
(``actorflow.update-reply``, id ``reply:<update_id>``). The owner
(``UpdateRunner``, fed by the run's ``SignalDesk``) validates the update
before recording anything, then runs the orchestrator's ``@update`` method
as steps in the namespace ``update/<seq>`` and records its outcome as the
step ``update/<seq>`` (which also marks the inbox entry taken). A reply is
posted only once that record is durable. A recovery re-posts the replies of
finished updates (idempotently) and runs again those a crash cut off, their
recorded steps replayed. When the run ends, updates without a reply fail
at the caller with ``RunFinishedError``.
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
from actorflow.runtime.workflow._signals import UPDATE_PREFIX
from actorflow.runtime.workflow._steps import close_namespace
from actorflow.runtime.workflow._update_handlers import UpdateSpec, update_handlers
from actorflow.runtime.workflow._wait_records import signal_type
from actorflow.storage import (
    ErrorInfo,
    EventRecord,
    InboxEntry,
    StepRecord,
    post_message,
    read_messages,
)
from actorflow.storage import decode_value as decode
from actorflow.storage import encode_value as encode

if TYPE_CHECKING:
    from anyio.abc import TaskGroup

    from actorflow.runtime.workflow._context import RunContext
    from actorflow.runtime.workflow._env import StepEnv
    from actorflow.storage import Store

__all__ = ["UPDATE_PREFIX", "UpdateOutcome", "UpdateRunner", "call_update"]

_log = structlog.get_logger("actorflow.updates")

REPLY_TYPE = "actorflow.update-reply"
"""The inbox type of an update's reply, posted by the run's owner."""


class UpdateOutcome(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """An update's reply, as recorded (step ``update/<seq>``) and as posted back.

    ``rejected`` replies (validator, no handler) are posted, never recorded.
    """

    seq: int
    update_id: str
    result: bytes | None = None
    error: ErrorInfo | None = None
    rejected: bool = False


def _update_id(entry_id: str) -> str:
    return entry_id.removeprefix("update:")


async def call_update(
    store: Store,
    run_id: str,
    message: object,
    *,
    update_id: str | None,
    sender: str | None,
    poll_interval: float,
    result_type: Any = Any,
) -> Any:
    """Post an update and wait for the run's reply; return the reply decoded as ``result_type``.

    Raises:
        RunNotFoundError: no such run.
        RunFinishedError: the run has ended (before or while waiting for the reply).
        UpdateRejectedError: the run's validator refused it, or it has no handler for it.
        UpdateFailedError: the handler raised.
        EncodingError: ``message`` cannot be encoded.
    """
    manifest = await store.read_run(run_id)
    if manifest.status.finished:
        raise RunFinishedError(run_id, str(manifest.status), "an update")
    update_id = update_id if update_id is not None else uuid.uuid4().hex
    posted = await post_message(
        store,
        run_id,
        entry_id=f"update:{update_id}",
        type=UPDATE_PREFIX + signal_type(type(message)),
        payload=encode(message, "update", type(message).__qualname__),
        sender=sender,
    )
    cursor = posted.seq + 1
    reply_id = f"reply:{update_id}"
    while True:
        ended = (await store.read_run(run_id)).status
        for entry in await read_messages(store, run_id, cursor):
            cursor = entry.seq + 1
            if entry.type == REPLY_TYPE and entry.entry_id == reply_id:
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

    def offer(self, entry: InboxEntry) -> None:
        """An update in the inbox (each ``seq`` is handled once per attempt)."""
        if self._stopped or entry.seq in self._offered:
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
        step_id = f"update/{entry.seq}"
        update_id = _update_id(entry.entry_id)
        recorded = env.view.steps.get(step_id)
        if recorded is not None:  # finished before a crash: its reply may not have been posted
            await self._reply(update_id, recorded.result or b"\xc0")
            return
        spec, message, refusal = self._accept(entry)
        if spec is None:
            outcome = UpdateOutcome(
                seq=entry.seq,
                update_id=update_id,
                error=ErrorInfo(type="UpdateRejectedError", message=refusal),
                rejected=True,
            )
            await self._reply(update_id, encode(outcome, "update reply"))
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
        data = encode(outcome, "update reply")
        env.recorder.record(
            StepRecord(step_id=step_id, kind="update", result=data, time=time.time())
        )
        # the reply is an output: what it says must survive a crash first
        with anyio.CancelScope(shield=True):
            await env.recorder.flush()
            await self._reply(update_id, data)

    def _accept(self, entry: InboxEntry) -> tuple[UpdateSpec | None, object, str]:
        """The handler and the decoded message, or why the update is refused."""
        kind = entry.type.removeprefix(UPDATE_PREFIX)
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
        await post_message(
            self._env.recorder.store,
            self._env.run_id,
            entry_id=f"reply:{update_id}",
            type=REPLY_TYPE,
            payload=data,
        )
