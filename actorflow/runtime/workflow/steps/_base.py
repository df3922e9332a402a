"""The one ``Step`` pattern: issued now, looked up in the log, replayed or run live, recorded.

Every kind of step subclasses ``Step``. Its id is issued and checked against
the log (``lookup``) when it is created; a live step's outcome becomes a
``StepRecord`` through ``step_record``, the one place such a record is built.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from actorflow.errors import StepFailedError, UnawaitedStepError
from actorflow.runtime.workflow._env import HistoryEnd
from actorflow.runtime.workflow._replay import call_site, check_replay
from actorflow.storage import StepRecord
from actorflow.storage import decode_value as decode

if TYPE_CHECKING:
    from collections.abc import Generator

    from opentelemetry.trace import Span

    from actorflow.runtime.workflow._env import StepEnv
    from actorflow.runtime.workflow._ids import Namespace
    from actorflow.storage import ErrorInfo, MessageRef, StateRef

wall_clock = time.time
"""``time.time`` bound once: the determinism guard wraps ``time.time`` while
orchestrators run, and the engine's own reads on every step need not pass
through the wrapper."""

__all__ = [
    "Step",
    "close_namespace",
    "lookup",
    "step_record",
    "wall_clock",
]

T = TypeVar("T")


def step_record(
    step_id: str,
    kind: str,
    *,
    issued: float,
    target: str | None = None,
    args_hash: str = "",
    result: bytes | None = None,
    error: ErrorInfo | None = None,
    metrics: dict[str, float] | None = None,
    state: StateRef | None = None,
    attempts: int = 1,
    attempt_errors: tuple[ErrorInfo, ...] = (),
    run_attempt: int | None = None,
    message: MessageRef | None = None,
) -> StepRecord:
    """The record of a step finished now (``time``), issued at ``issued``, by ``run_attempt``."""
    return StepRecord(
        step_id=step_id,
        kind=kind,
        target=target,
        args_hash=args_hash,
        result=result,
        error=error,
        metrics={} if metrics is None else metrics,
        state=state,
        attempts=attempts,
        attempt_errors=attempt_errors,
        time=wall_clock(),
        issued=issued,
        run_attempt=run_attempt,
        message=message,
    )


def lookup(
    env: StepEnv, step_id: str, kind: str, target: str | None, digest: str
) -> StepRecord | None:
    """The step's record, checked against what the code issues now (the replay contract)."""
    view = env.view
    record = view.steps.get(step_id)
    if record is not None:
        if record.kind != kind or record.target != target or record.args_hash != digest:
            check_replay(view, step_id, kind, target, digest)
    elif step_id in view.decided or step_id in view.events:
        # a decision, or a ctx.patched marker, where the code now issues this step
        check_replay(view, step_id, kind, target, digest)
    return record


class Step(Generic[T]):
    """An issued step of a run. Await it (once) for its result.

    Attributes:
        id: the step's id (its path in the run).
        issued: when it was issued (``time.time()``), kept in its record.
        record: its record in the log, if it completed before (then it replays).
        inline: whether replaying it only returns (or raises) its record: no
            agent, no I/O (``ctx.gather`` replays such steps without a task).
    """

    kind = "step"
    inline = True
    _started = False
    span: Span | None = None  # a live step's span, when tracing is on
    span_ends_at_record = True  # a sleep's goes on until it wakes

    def __init__(self, env: StepEnv, ns: Namespace, target: str | None, digest: str) -> None:
        """Issue the step's id now; ``digest`` is its ``args_hash``."""
        self.env = env
        self.ns = ns
        self.id = step_id = ns.next_step()
        self.target = target
        self.hash = digest
        self.record: StepRecord | None = lookup(env, step_id, self.kind, target, digest)
        # a replayed step records nothing: only a live one needs the time
        self.issued = wall_clock() if self.record is None else 0.0
        if env.trace is not None:
            self.span = env.trace.step(self.kind, step_id, target, self.record is not None)
        ns.pending[step_id] = self

    @property
    def recorded(self) -> bool:
        """Whether the step completed before: awaiting it replays its record."""
        return self.record is not None

    def __await__(self) -> Generator[Any, None, T]:
        return self._run().__await__()

    async def _run(self) -> T:
        await self.start()
        return await self.finish()

    def claim(self) -> None:
        """Mark the step awaited (once)."""
        if self._started:
            raise RuntimeError(f"step {self.id} was awaited twice")
        self._started = True
        self.ns.pending.pop(self.id, None)

    async def start(self) -> None:
        """Claim the step and, if it runs live, hand its work out."""
        self.claim()
        if not self.recorded:
            if self.env.replaying:
                # the one gate of a replay: every live step of any kind starts here
                raise HistoryEnd(self.id, self.kind, call_site())
            await self._deliver()

    async def finish(self) -> T:
        """The step's outcome: replayed from its record, or waited for and recorded."""
        if self.recorded:
            return self.replay()
        return await self._live()

    def replay(self) -> T:
        """Return (or raise) the recorded outcome."""
        record = self.record
        assert record is not None
        if record.error is not None:
            raise self.failure(record.error)
        return self._decode(record.result)

    def failure(self, error: ErrorInfo) -> StepFailedError:
        """The error a failed step raises, live or replayed."""
        return StepFailedError(self.env.run_id, self.id, error.type, error.message)

    def _record_outcome(
        self,
        *,
        result: bytes | None = None,
        error: ErrorInfo | None = None,
        metrics: dict[str, float] | None = None,
        state: StateRef | None = None,
        attempts: int = 1,
        attempt_errors: tuple[ErrorInfo, ...] = (),
        message: MessageRef | None = None,
    ) -> None:
        """Append the live step's record (not flushed: the durability rule says when)."""
        span, trace = self.span, self.env.trace
        if span is not None and trace is not None and self.span_ends_at_record:
            self.span = None
            trace.step_done(span, self.kind, self.issued, error, attempts)
        self.env.recorder.record(
            step_record(
                self.id,
                self.kind,
                issued=self.issued,
                target=self.target,
                args_hash=self.hash,
                result=result,
                error=error,
                metrics=metrics,
                state=state,
                attempts=attempts,
                attempt_errors=attempt_errors,
                run_attempt=self.env.recorder.attempt,
                message=message,
            )
        )

    async def _deliver(self) -> None:
        """Hand the step's work out (live steps only); default: nothing to deliver."""

    def _decode(self, result: bytes | None) -> T:
        if result is None:
            return None  # type: ignore[return-value]  # a step of no result (a send)
        value: T = decode(result, Any, "result of step", self.id)
        return value

    async def _live(self) -> T:
        raise NotImplementedError


async def close_namespace(env: StepEnv, ns: Namespace) -> None:
    """End of a phase (or the run): every send recorded, every step awaited.

    Raises:
        StepFailedError: a ``ctx.send`` of the namespace failed (the first).
        UnawaitedStepError: steps were issued and never awaited.
    """
    sends, ns.sends = ns.sends, []
    for done in sends:
        await done.wait()
    if ns.failed_sends:
        raise ns.failed_sends.pop(0)
    if ns.pending:
        ids = list(ns.pending)
        ns.pending.clear()
        raise UnawaitedStepError(env.run_id, ids)
