"""The one durable wait: ``ctx.wait_for`` and ``ctx.wait_for_input``.

A wait takes one signal of its type from the run's inbox (see
``_signals.py``), or ends at its deadline. It records its request when it
starts (type, deadline, prompt; see ``_wait_records.py``) and its
resolution when it ends, so a replay returns the same message, or the same
timeout, and never takes another. The deadline is recorded, so a restart in
the middle of a timeout does not reset it.

A pausing wait (``wait_for_input``, or ``pause=True``) that finds nothing in
the inbox ends the run's tasks instead of waiting in the process: the run
is ``paused`` until ``resume``, or until ``recover()`` finds its wait can
resolve (a matching signal arrived, or the deadline passed: ``can_go_on`` in
``_recovery.py``).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, TypeVar, cast

import anyio
import msgspec

from actorflow.errors import WaitTimeoutError
from actorflow.runtime.workflow._ids import value_hash
from actorflow.runtime.workflow._inbox import InboxKind
from actorflow.runtime.workflow._signals import Waiter
from actorflow.runtime.workflow._wait_records import (
    WaitRequest,
    WaitResolution,
    read_request,
    read_resolution,
)
from actorflow.runtime.workflow.steps._base import Step
from actorflow.storage import EventRecord
from actorflow.storage import decode_value as decode
from actorflow.storage import encode_value as encode

if TYPE_CHECKING:
    from actorflow.runtime.workflow._env import StepEnv
    from actorflow.runtime.workflow._ids import Namespace
    from actorflow.storage import InboxEntry

__all__ = ["NO_DEFAULT", "PauseRun", "WaitStep"]

T = TypeVar("T")


class _NoDefault:
    def __repr__(self) -> str:
        return "NO_DEFAULT"


#: ``default`` of a wait that raises ``WaitTimeoutError`` at its deadline.
NO_DEFAULT: Any = _NoDefault()


class PauseRun(BaseException):
    """Raised by a pausing wait with nothing to take: the run pauses (``RunPaused``)."""

    def __init__(self, step_id: str, prompt: str, deadline: float | None = None) -> None:
        self.step_id = step_id
        self.prompt = prompt
        self.deadline = deadline


class WaitStep(Step[T]):
    """A wait for one signal of type ``answer_type``, until a deadline if it has a timeout.

    Records: an ``EventRecord`` ``<kind>_requested`` with a ``WaitRequest``
    when it starts; a ``StepRecord`` ``<kind>`` with a ``WaitResolution``
    when it ends. ``kind`` is ``wait`` (``ctx.wait_for``) or ``input``
    (``ctx.wait_for_input``, whose records keep the names of 0.2).
    """

    def __init__(
        self,
        env: StepEnv,
        ns: Namespace,
        kind: str,
        answer_type: type[T],
        type_name: str,
        *,
        timeout: float | None,
        default: object,
        prompt: str | None,
        pause: bool,
        source: InboxKind = InboxKind.SIGNAL,
    ) -> None:
        self.kind = kind
        self._source = source
        self._type = answer_type
        self._type_name = type_name
        self._timeout = timeout
        self._default = default
        self._prompt = prompt
        self._pause = pause
        self._waiter: Waiter | None = None
        # 0.2 recorded input waits with no hash; the type is part of a wait_for's identity
        super().__init__(env, ns, None, "" if kind == "input" else value_hash(f"wait:{type_name}"))

    # --- replay -------------------------------------------------------------------

    def _decode(self, result: bytes | None) -> T:
        record = self.record  # replayed: read with its kind (0.2's answers were bare)
        assert record is not None
        return self._outcome(read_resolution(record))

    def _outcome(self, resolution: WaitResolution) -> T:
        if resolution.timed_out:
            if self._default is NO_DEFAULT:
                raise WaitTimeoutError(self.env.run_id, self.id, self._type_name, self._timeout)
            return cast("T", self._default)
        payload = resolution.payload or b"\xc0"
        answer: T = decode(payload, self._type, f"{self.kind} of step", self.id)
        return answer

    # --- live ---------------------------------------------------------------------

    def _request(self) -> WaitRequest:
        """The wait's request: as recorded before a restart (its deadline stands), or new."""
        event = self.env.view.events.get(self.id)
        if event is not None and event.kind == f"{self.kind}_requested":
            try:
                return read_request(self.kind, event.data or b"")
            except msgspec.DecodeError:
                pass  # unreadable: the wait starts over, with a new record
        deadline = time.time() + self._timeout if self._timeout is not None else None
        request = WaitRequest(
            type=self._type_name,
            deadline=deadline,
            timeout=self._timeout,
            prompt=self._prompt,
            pause=self._pause,
        )
        self.env.recorder.record(
            EventRecord(
                kind=f"{self.kind}_requested",
                step_id=self.id,
                data=encode(request, "wait request"),
                time=time.time(),
            )
        )
        return request

    def _accept(self, entry: InboxEntry) -> bool:
        try:
            decode(entry.payload, self._type, "signal", str(entry.seq))
        except Exception:
            return False
        return True

    async def _deliver(self) -> None:
        # in the order waits start (ctx.gather starts them in step order), so
        # concurrent waits of one type take entries in step order
        self._waiter = Waiter(self.id, self._type_name, self._accept, self._source)
        self.env.signals.register(self._waiter)

    async def _live(self) -> T:
        waiter = self._waiter
        assert waiter is not None
        desk = self.env.signals
        request = self._request()
        consumed = False
        try:
            await desk.check()
            deadline = request.deadline
            if waiter.entry is None and (deadline is None or deadline > time.time()):
                if request.pause:
                    await self.env.recorder.flush()
                    prompt = request.prompt
                    raise PauseRun(self.id, prompt or f"a {request.type} signal", deadline)
                with anyio.move_on_after(
                    deadline - time.time() if deadline is not None else float("inf")
                ):
                    await desk.wait(waiter)
            entry = waiter.entry  # taken just as the deadline passed: it counts
            resolution = (
                WaitResolution()
                if entry is None
                else WaitResolution(
                    seq=entry.seq,
                    entry_id=entry.entry_id,
                    payload=entry.payload,
                    sender=entry.sender,
                    sent=entry.sent,
                )
            )
            rec = self.env.recorder
            self._record_outcome(result=encode(resolution, "wait resolution"))
            consumed = True
        finally:
            desk.withdraw(waiter, consumed=consumed)
        await rec.after_step()
        return self._outcome(resolution)
