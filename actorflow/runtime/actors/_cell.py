"""A running actor: its mailbox, its message loop and how supervision applies.

Every actor is one task in the runtime's task group, running
:meth:`ActorCell.main`. The cell keeps the state's encoded bytes after each
successfully handled message: that is both the rollback point when a handler
raises and the exact state a :class:`Reply` from ``ActorRef.deliver`` carries.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final, Protocol

import anyio
import msgspec
from anyio.lowlevel import checkpoint

from actorflow import _log
from actorflow._text import describe, error_message
from actorflow.errors import (
    ActorFailedError,
    ActorStoppedError,
    EncodingError,
    EscalationError,
    UnhandledMessageError,
)
from actorflow.runtime.actors._actor import Actor, NoneType, message_meta
from actorflow.runtime.actors._mailbox import CLOSED, Mailbox
from actorflow.runtime.actors._supervisor import RestartTracker
from actorflow.storage import ENCODE_ERRORS
from actorflow.storage import decoder_for as shared_decoder_for
from actorflow.storage import encoder as shared_encoder

if TYPE_CHECKING:
    from collections.abc import Callable
    from types import CodeType

    from actorflow.runtime.actors._actor import Dispatch
    from actorflow.runtime.actors._envelope import Envelope, Reply
    from actorflow.runtime.actors._ref import ActorRef
    from actorflow.runtime.actors._supervisor import SupervisorPolicy

__all__ = [
    "NONE_BYTES",
    "ActorCell",
    "CellOwner",
    "actor_task_code",
    "decoder_for",
    "encode_state",
    "encoder",
]

logger = _log.get_logger("actorflow.runtime")
encoder: Final = shared_encoder  # the package's one MessagePack encoder
NONE_BYTES: Final = encoder.encode(None)
# what msgspec raises for a value it cannot encode: an unsupported type, a lone
# surrogate (UnicodeEncodeError), an int over 64 bits, nesting deeper than the stack


def encode_state(state: object, actor: str) -> bytes:
    """An actor's state as MessagePack, or an ``EncodingError`` naming the actor."""
    try:
        return encoder.encode(state)
    except ENCODE_ERRORS as exc:
        raise EncodingError(f"state of actor {actor!r}", error_message(exc)) from exc


# A handler that never awaits could otherwise hold the event loop for as long
# as its mailbox refills; yield once per this many messages handled back to back.
FAIRNESS_BATCH: Final = 64


class CellOwner(Protocol):
    """What a cell needs of the scope it lives in (an ``ActorScope``)."""

    @property
    def id(self) -> str | None:
        """The scope's id, for log lines."""
        ...

    @property
    def emit_sink(self) -> Callable[[str, object], None] | None:
        """Where the actor's ``emit`` goes (None: nowhere)."""
        ...

    def escalate(self, error: EscalationError) -> None:
        """Called by the cell when its actor used up its restart budget."""

    def forget(self, cell: ActorCell) -> None:
        """Called by the cell's task as it ends."""


def decoder_for(state_cls: Any) -> msgspec.msgpack.Decoder[Any]:
    """The decoder of a state type, from the package's one cache (actors of a class share it)."""
    decoder = shared_decoder_for(state_cls)
    return decoder if decoder is not None else msgspec.msgpack.Decoder(state_cls)


class ActorCell:
    """One live actor: instance, mailbox, supervision, lifecycle."""

    __slots__ = (
        "__weakref__",
        "_cancel_requested",
        "_done_event",
        "_inflight",
        "actor",
        "actor_cls",
        "cancel_scope",
        "decoder",
        "dispatch",
        "done",
        "good",
        "has_state",
        "mailbox",
        "name",
        "ref",
        "scope",
        "tracker",
    )

    def __init__(
        self,
        *,
        actor_cls: type[Actor],
        name: str,
        scope: CellOwner,
        state: Any,
        state_bytes: bytes,
        state_cls: type,
        dispatch: Dispatch,
        policy: SupervisorPolicy,
        mailbox_size: int,
    ) -> None:
        self.actor_cls = actor_cls
        self.name = name
        self.scope = scope
        self.dispatch = dispatch
        self.mailbox: Mailbox[Envelope] = Mailbox(name, mailbox_size)
        self.tracker = RestartTracker(policy)
        self.has_state = state_cls is not NoneType
        self.decoder = decoder_for(state_cls) if self.has_state else None
        self.good = state_bytes
        self.actor = self._new_instance(state)
        self.cancel_scope: anyio.CancelScope | None = None
        self.done = False
        self._done_event: anyio.Event | None = None
        self._inflight: Reply | None = None
        self._cancel_requested = False
        self.ref: ActorRef[Any] | None = None  # its LocalRef, set by the scope

    def _new_instance(self, state: Any) -> Actor:
        actor = self.actor_cls.__new__(self.actor_cls)
        actor.name = self.name
        actor.state = state
        sink = self.scope.emit_sink
        if sink is not None:
            actor._actorflow_emit = sink
        actor.__init__()  # type: ignore[misc]  # actors take no constructor arguments
        return actor

    def _restored_state(self) -> Any:
        return self.decoder.decode(self.good) if self.decoder is not None else None

    # --- task body ---------------------------------------------------------

    async def main(self) -> None:
        """The actor's task: start, handle messages until closed, stop."""
        with anyio.CancelScope() as scope:
            self.cancel_scope = scope
            if self._cancel_requested:
                scope.cancel()
            try:
                await self._lifecycle()
            finally:
                self._cleanup()

    async def _lifecycle(self) -> None:
        need_start = True
        while True:
            failure: Exception | None
            if need_start:
                failure = await self._start()
            else:
                failure = await self._handle_messages()
                if failure is None:
                    break  # mailbox closed and drained
            need_start = failure is not None
            if failure is not None and not await self._supervise(failure):
                return
        await self._call_on_stop()
        if _log.enabled("info"):
            logger.info("actor_stopped", actor=self.name, scope=self.scope.id)

    async def _start(self) -> Exception | None:
        try:
            await self.actor.on_start()
            if self.has_state:
                self.good = encode_state(self.actor.state, self.name)
        except Exception as exc:
            return exc
        return None

    async def _handle_messages(self) -> Exception | None:
        # The hot path: locals instead of attribute lookups, no yield unless
        # the mailbox is empty or FAIRNESS_BATCH messages were handled in a row.
        mailbox = self.mailbox
        buf = mailbox._buf  # the mailbox's deque itself: `if buf` costs no call per message
        actor = self.actor
        has_state = self.has_state
        encode = encoder.encode
        meta_var = message_meta
        # read, not set: setting a context variable costs memory in every idle actor
        current_meta = meta_var.get()
        in_a_row = 0
        while True:
            if buf:
                if in_a_row >= FAIRNESS_BATCH:
                    in_a_row = 0
                    await checkpoint()
                    continue
                envelope: Any = mailbox.get_nowait()
                in_a_row += 1
            else:
                in_a_row = 0
                # drop the last message and reply before parking: idle actors hold nothing
                envelope = fn = msg = reply = meta = result = None
                envelope = await mailbox.get()
                if envelope is CLOSED:
                    return None
            fn, msg, reply, meta = envelope
            if meta is not current_meta:
                meta_var.set(meta)
                current_meta = meta
            self._inflight = reply
            try:
                result = await fn(actor, msg)
                if has_state:
                    try:
                        self.good = encode(actor.state)
                    except ENCODE_ERRORS as exc:
                        raise EncodingError(
                            f"state of actor {self.name!r}", error_message(exc)
                        ) from exc
            except Exception as exc:
                self._inflight = None
                if reply is not None:
                    failed = ActorFailedError(self.name, exc)
                    failed.__cause__ = exc
                    reply.fail(failed)
                return exc
            self._inflight = None
            if reply is not None:
                reply.value = result
                if reply.want_state:
                    reply.state = self.good if has_state else NONE_BYTES
                reply.succeed()

    def unhandled(self, msg: object) -> UnhandledMessageError:
        """The error refusing ``msg``, which no handler of the actor takes."""
        return UnhandledMessageError(self.name, type(msg), self.dispatch.handled)

    # --- supervision -------------------------------------------------------

    async def _supervise(self, failure: Exception) -> bool:
        """Apply the policy after ``failure``; True if the actor goes on."""
        # Whatever happens next, the failed handler leaves no trace in the state.
        self.actor.state = self._restored_state()
        action, delay = self.tracker.decide()
        logger.warning(
            "actor_failed",
            actor=self.name,
            scope=self.scope.id,
            error=describe(failure),
            action=action,
        )
        if action == "restart":
            await self._call_on_stop()
            if delay > 0:
                await self.tracker.policy.sleep(delay)
            self.actor = self._new_instance(self._restored_state())
            logger.info(
                "actor_restarted",
                actor=self.name,
                scope=self.scope.id,
                restarts=self.tracker.restarts,
            )
            return True
        self.mailbox.close()
        await self._call_on_stop()
        if action == "escalate":
            policy = self.tracker.policy
            error = EscalationError(self.name, self.tracker.restarts, policy.within, failure)
            error.__cause__ = failure
            logger.error("actor_escalated", actor=self.name, scope=self.scope.id)
            self.scope.escalate(error)
        return False

    async def _call_on_stop(self) -> None:
        try:
            await self.actor.on_stop()
        except Exception as exc:
            # on_stop runs on the way out: nobody is left to report to but the log
            logger.warning(
                "actor_on_stop_failed",
                actor=self.name,
                error=describe(exc),
            )

    # --- stopping ----------------------------------------------------------

    def _cleanup(self) -> None:
        self.mailbox.close()
        detail = "it stopped before answering"
        if self._inflight is not None:
            self._inflight.fail(ActorStoppedError(self.name, detail))
            self._inflight = None
        for _fn, _msg, reply, _meta in self.mailbox.drain():
            if reply is not None:
                reply.fail(ActorStoppedError(self.name, detail))
        self.done = True
        self.scope.forget(self)
        # the ref holds the cell: without this cycle a stopped actor is freed at once
        self.ref = None
        if self._done_event is not None:
            self._done_event.set()

    @property
    def ends_when_closed(self) -> bool:
        """Whether closing the mailbox ends the actor without running any of its code.

        True while it waits on an empty mailbox and has no ``on_stop`` of its own.
        """
        return self.mailbox.receiver_waiting and type(self.actor).on_stop is Actor.on_stop

    def cancel(self) -> None:
        """Cancel the actor's task at once (it may be in the middle of a handler)."""
        if self.cancel_scope is not None:
            self.cancel_scope.cancel()
        else:
            self._cancel_requested = True  # not started yet: cancelled as it starts

    async def wait_done(self) -> None:
        """Wait until the actor's task has finished."""
        if self.done:
            return
        if self._done_event is None:
            self._done_event = anyio.Event()
        await self._done_event.wait()


def actor_task_code() -> CodeType:
    """The code object of every actor's task (``ActorCell.main``): frames under it are an actor's.

    Its handlers, ``on_start`` and ``on_stop`` all run under it, and nothing
    else does (a workflow's orchestrator runs in its run's task).
    """
    return ActorCell.main.__code__
