"""The awaitable steps a ``RunContext`` issues: each recorded live, or replayed.

A step is created (and gets its id) synchronously by the ``ctx`` call. Awaiting
it runs two halves: ``_start`` delivers its message (in issue order, after the
output-commit flush) and ``_finish`` waits for the outcome and records it.
``ctx.gather`` starts every step in order, then finishes them concurrently.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, Generic, TypeVar

import anyio

from actorflow.errors import (
    ActorError,
    ActorFailedError,
    NonDeterminismError,
    StepFailedError,
)
from actorflow.runtime.workflow._ids import StepInfo, _StepMeta, call_site, message_hash, value_hash
from actorflow.runtime.workflow._ids import _meta as current_step_meta
from actorflow.runtime.workflow._recorder import _BLOB, Turnstile, decode, encode
from actorflow.storage import ErrorInfo, MilestoneRecord, StepRecord

if TYPE_CHECKING:
    from collections.abc import Generator

    from actorflow.runtime.workflow._context import RunContext
    from actorflow.runtime.workflow._ids import Namespace

__all__ = ["AskStep", "Step", "ValueStep"]

T = TypeVar("T")


class Step(Generic[T]):
    """An issued step of a run. Await it (once) for its result."""

    kind = "step"
    # whether awaiting a recorded step only returns (or raises) its record:
    # no agent, no I/O (set per subclass from whether it overrides _finish)
    _inline = True
    _started = False

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls._inline = cls._finish is Step._finish

    def __init__(self, ctx: RunContext, ns: Namespace, target: str | None, digest: str) -> None:
        """Issue the step's id now; ``digest`` is its ``args_hash``."""
        self._ctx = ctx
        self._ns = ns
        self.id = ns.next_step()
        self.target = target
        self.hash = digest
        self.record: StepRecord | None = ctx._view.steps.get(self.id)
        if self.record is not None:
            self._check(self.record)
        ns.pending[self.id] = self

    def _check(self, record: StepRecord) -> None:
        if (record.kind, record.target, record.args_hash) != (self.kind, self.target, self.hash):
            raise NonDeterminismError(
                self._ctx.run_id,
                self.id,
                f"{record.kind} {record.target or ''} (args {record.args_hash})",
                f"{self.kind} {self.target or ''} (args {self.hash})",
                call_site(),
            )

    @property
    def replays_inline(self) -> bool:
        """Whether awaiting only returns (or raises) its record: no agent, no I/O."""
        return self.record is not None and self._inline

    def __await__(self) -> Generator[Any, None, T]:
        return self._run().__await__()

    async def _run(self) -> T:
        await self._start()
        return await self._finish()

    def _claim(self) -> None:
        """Mark the step awaited (once)."""
        if self._started:
            raise RuntimeError(f"step {self.id} was awaited twice")
        self._started = True
        self._ns.pending.pop(self.id, None)

    async def _start(self) -> None:
        self._claim()
        if self.record is None:
            await self._deliver()

    async def _finish(self) -> T:
        if self.record is not None:
            return self._replay(self.record)
        return await self._live()

    async def _deliver(self) -> None:
        """Hand the step's work out (live steps only); default: nothing to deliver."""

    def _replay(self, record: StepRecord) -> T:
        if record.error is not None:
            raise self._failure(record.error)
        return self._decode(record.result)

    def _decode(self, result: bytes | None) -> T:
        return None if result is None else decode(result, Any, "result of step", self.id)  # type: ignore[return-value]

    async def _live(self) -> T:
        raise NotImplementedError

    def _failure(self, error: ErrorInfo) -> StepFailedError:
        return StepFailedError(self._ctx.run_id, self.id, error.type, error.message)


class ValueStep(Step[T]):
    """``ctx.now``, ``ctx.random``, ``ctx.uuid``: a value computed once, then replayed."""

    def __init__(self, ctx: RunContext, ns: Namespace, kind: str, compute: Any, type_: Any) -> None:
        self.kind = kind
        self._compute = compute
        self._type = type_
        super().__init__(ctx, ns, None, value_hash(kind))

    def _decode(self, result: bytes | None) -> T:
        return decode(result or b"\xc0", self._type, "result of step", self.id)  # type: ignore[no-any-return]

    async def _live(self) -> T:
        value = self._compute()
        rec = self._ctx._recorder
        rec.record(
            StepRecord(
                step_id=self.id,
                kind=self.kind,
                args_hash=self.hash,
                result=encode(value, self.kind),
                time=time.time(),
            )
        )
        await rec.after_step()
        return value  # type: ignore[no-any-return]


class AskStep(Step[T]):
    """``ctx.ask`` (and ``ctx.send``): a message to an agent, its reply and its new state."""

    kind = "ask"
    # what a step only has once delivered (class-level defaults: replays never set them)
    _pending: Any = None  # the Reply of the delivery in flight
    _ticket = -1
    _turnstile: Any = None
    _deliver_error: ActorError | None = None
    _meta: _StepMeta | None = None  # dropped once the step is finished (see _done)

    def __init__(
        self,
        ctx: RunContext,
        ns: Namespace,
        ref: Any,
        message: Any,
        timeout: float | None,
        wait: bool = True,
    ) -> None:
        if not wait:
            self.kind = "send"
        self._ref = ref
        self._message = message
        self._timeout = timeout
        # Step.__init__, inlined: a recovery issues thousands of these
        self._ctx = ctx
        self._ns = ns
        self.id = step_id = ns.next_step()
        self.target = target = ref.name
        self.hash = message_hash(self.kind, target, message)
        self.record = record = ctx._view.steps.get(step_id)
        if record is not None:
            self._check(record)
        else:  # a replayed step never reaches its agent
            self._meta = self._make_meta(1)
        ns.pending[step_id] = self

    def _make_meta(self, attempt: int) -> _StepMeta:
        ctx = self._ctx
        key = f"{ctx.run_id}/{self.id}"
        info = StepInfo(run_id=ctx.run_id, step_id=self.id, key=key, attempt=attempt)
        progress = ctx._view.milestones.get(key)
        meta = _StepMeta(info, self._save_milestone, progress.data if progress else None)
        return meta

    async def _save_milestone(self, data: bytes) -> None:
        rec = self._ctx._recorder
        key = f"{self._ctx.run_id}/{self.id}"
        rec.record(MilestoneRecord(key=key, agent=self._ref.name, data=data))
        # a handler still running after its step finished holds its meta in its context
        meta = self._meta if self._meta is not None else current_step_meta()
        if meta is not None and meta.info.key == key:
            meta.progress = data
        await rec.flush()

    def _metrics(self) -> dict[str, float]:
        """What the handler reported for the step (``report``)."""
        meta = self._meta
        return meta.metrics if meta is not None else {}

    def _done(self) -> None:
        # the meta holds this step (``milestone``): without the cycle, a finished
        # run's steps (and all they reach) are freed at once, not by the GC
        self._meta = None

    def _decode(self, result: bytes | None) -> T:
        # the handler's return annotation, looked up only when a reply is replayed
        reply_type = self._ctx._runner.reply_type(self._ref, self._message)
        return decode(result or b"\xc0", reply_type, "reply of step", self.id)  # type: ignore[no-any-return]

    async def _deliver(self) -> None:
        rec = self._ctx._recorder
        if rec.barrier_needed():
            await rec.output_barrier()
        try:
            await self._redeliver()
        except ActorError as exc:
            # a stopped agent, say: handled with the task's retries in _live
            self._deliver_error = exc

    async def _redeliver(self) -> None:
        turnstile = self._turnstile = self._ctx._recorder.turnstile(self._ref.name)
        self._ticket = turnstile.take()
        self._pending = None
        try:
            self._pending = await self._ref.deliver(self._message, self._meta)
        except BaseException:
            self._release(turnstile)
            raise

    def _release(self, turnstile: Turnstile) -> None:
        if self._ticket >= 0:
            turnstile.release(self._ticket)
            self._ticket = -1

    def _abandon(self) -> None:
        """Give up a delivered step that will never be finished (its gather was cancelled)."""
        if self._ticket >= 0:
            self._release(self._turnstile)

    def _answered(self) -> bool:
        """Whether the step is delivered and its reply is in, without an error."""
        pending = self._pending
        return pending is not None and pending.event.is_set() and pending.error is None

    async def _live(self) -> T:
        turnstile = self._ctx._recorder.turnstile(self._ref.name)
        try:
            reply, state, attempt = await self._outcome(turnstile)
            if not turnstile.ready(self._ticket):
                await turnstile.wait(self._ticket)
            await self._record_success(reply, state, attempt)
        finally:
            self._release(turnstile)
            self._done()
        await self._ctx._recorder.after_step()
        return reply  # type: ignore[no-any-return]

    async def _live_answered(self) -> T:
        """``_live`` for a step whose reply is in (``_answered``), without the sync flush.

        ``ctx.gather`` records such steps in order, in its own task, and makes
        them durable together (one flush) in ``sync`` mode.
        """
        turnstile = self._turnstile
        try:
            pending = self._pending
            if not turnstile.ready(self._ticket):
                await turnstile.wait(self._ticket)
            await self._record_success(pending.value, pending.state, 1)
        finally:
            self._release(turnstile)
            self._done()
        return pending.value  # type: ignore[no-any-return]

    async def _outcome(self, turnstile: Turnstile) -> tuple[Any, bytes, int]:
        """The reply and state, retrying a failed task; records the final failure."""
        config = self._ctx._config
        attempt = 1
        handler_error: BaseException | None = None
        while True:
            try:
                if self._deliver_error is not None:
                    error, self._deliver_error = self._deliver_error, None
                    raise error
                if self._pending is None:  # a retry (the first delivery happened in _start)
                    await self._redeliver()
                pending = self._pending
                if self._timeout:
                    with anyio.fail_after(self._timeout):
                        await pending.event.wait()
                elif not pending.event.is_set():
                    await pending.event.wait()
                if pending.error is not None:
                    raise pending.error
                return pending.value, pending.state, attempt
            except (ActorError, TimeoutError) as exc:
                if isinstance(exc, ActorFailedError):
                    handler_error = exc  # the root cause, worth more than a later "stopped"
                if attempt > config.step_retries:
                    await turnstile.wait(self._ticket)
                    raise await self._record_failure(handler_error or exc) from exc
                self._release(turnstile)
                self._pending = None
                await anyio.sleep(config.retry_backoff * 2 ** (attempt - 1))
                attempt += 1
                self._meta = self._make_meta(attempt)

    async def _record_success(self, reply: Any, state: bytes, attempts: int) -> None:
        """Record the step's reply and the agent's new state (not flushed: see ``_live``)."""
        rec = self._ctx._recorder
        name = self._ref.name
        ref = None
        if self._ref.scope == self._ctx.run_id:
            # only the run's own agents are restored from its records; an actor
            # of the runtime outlives runs and keeps its own state
            agent_type = rec.agent_types.get(name, "")
            ref = rec.inline_state_ref(name, agent_type, state)
            if ref is _BLOB:
                ref = await rec.state_ref(name, agent_type, state)
        result = None if self.kind == "send" else encode(reply, "reply of", name)
        rec.record(
            StepRecord(
                step_id=self.id,
                kind=self.kind,
                target=name,
                args_hash=self.hash,
                result=result,
                metrics=self._metrics(),
                state=ref,  # type: ignore[arg-type]
                attempts=attempts,
                time=time.time(),
            )
        )

    async def _record_failure(self, exc: BaseException) -> StepFailedError:
        cause = exc.__cause__ if exc.__cause__ is not None else exc
        error = ErrorInfo.of(cause)
        rec = self._ctx._recorder
        rec.record(
            StepRecord(
                step_id=self.id,
                kind=self.kind,
                target=self._ref.name,
                args_hash=self.hash,
                error=error,
                metrics=self._metrics(),
                attempts=self._ctx._config.step_retries + 1,
                time=time.time(),
            )
        )
        rec.emit("step_failed", step_id=self.id, agent=self._ref.name, error=error.type)
        await rec.after_step()
        return self._failure(error)
