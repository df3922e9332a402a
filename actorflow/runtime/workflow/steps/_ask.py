"""Messages to agents: ``ctx.ask`` and ``ctx.send``, ordered by their agent's turnstile.

An ask is delivered when it starts (after the output-commit flush) and
recorded, with the agent's new state, once its reply is in and every earlier
message to the agent is recorded (``Turnstile``). A failed task is retried by
its ``RetryPolicy``; each failed attempt is recorded (a milestone of the
step's, ``key#attempts``) before the backoff, so a recovery goes on with the
next attempt, never one that is recorded. An ask whose handler uses a
``Limit`` takes it before delivery and gives it back when the reply is in.
``record_as_answered`` is ``ctx.gather``'s fast path: plain asks recorded as
their replies come in, without a task per step.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypeVar

import anyio
import msgspec

from actorflow.errors import ActorError, ActorFailedError, StepFailedError
from actorflow.runtime.actors import class_name
from actorflow.runtime.workflow._agents import reply_type
from actorflow.runtime.workflow._flow import agent_flow
from actorflow.runtime.workflow._ids import message_digest
from actorflow.runtime.workflow._progress import StepInfo, StepMeta, current_step_meta
from actorflow.runtime.workflow._tracing import traced_handler
from actorflow.runtime.workflow.steps._base import Step, lookup, wall_clock
from actorflow.runtime.workflow.steps._turnstile import Turnstile
from actorflow.storage import ErrorInfo, MessageRef, MilestoneRecord
from actorflow.storage import decode_value as decode
from actorflow.storage import encode_value as encode

if TYPE_CHECKING:
    from collections.abc import Callable

    from actorflow.runtime.actors import AgentRef, AgentReply
    from actorflow.runtime.flow import Limiter, Permit, RetryPolicy
    from actorflow.runtime.workflow._env import StepEnv
    from actorflow.runtime.workflow._ids import Namespace
    from actorflow.runtime.workflow._recorder import Recorder
    from actorflow.storage import StateRef

__all__ = ["INLINE_MESSAGE_BYTES", "AskStep", "SendStep", "record_as_answered"]

T = TypeVar("T")

INLINE_MESSAGE_BYTES = 4096
"""A message's MessagePack up to this size travels in its step's record; a larger one is a blob."""

ATTEMPTS = "#attempts"
"""The suffix of the milestone key that records a step's failed attempts."""


class AttemptLog(msgspec.Struct, frozen=True, kw_only=True):
    """A retried step's failed attempts so far, and when the next one is due (clock time)."""

    errors: tuple[ErrorInfo, ...]
    due: float


def _turnstile(env: StepEnv, agent: str) -> Turnstile:
    """The record-ordering turnstile of ``agent`` in the run."""
    turnstile = env.turnstiles.get(agent)
    if turnstile is None:
        turnstile = env.turnstiles[agent] = Turnstile()
    return turnstile


class AskStep(Step[T]):
    """``ctx.ask``: a message to an agent, its reply and the agent's new state.

    Attributes (live steps, once delivered): ``pending`` is the reply slot,
    ``turnstile`` / ``ticket`` order the agent's records by delivery.
    """

    kind = "ask"
    # what a step only has once delivered (class-level defaults: replays never set them)
    pending: AgentReply | None = None
    ticket = -1
    turnstile: Turnstile | None = None
    _deliver_error: ActorError | None = None
    _meta: StepMeta | None = None  # dropped once the step is finished (see _done)
    _errors: tuple[ErrorInfo, ...] = ()  # of the failed attempts so far
    _due = 0.0  # when a recovered step's next attempt is due (the clock's time)
    _limiter: Limiter | None = None  # the limit its last delivery took
    _payload: bytes | None = None  # a live step's message, to record (record_messages)

    def __init__(
        self,
        env: StepEnv,
        ns: Namespace,
        ref: AgentRef,
        message: object,
        timeout: float | None,
        retry: RetryPolicy | None = None,
    ) -> None:
        self.ref = ref
        self.message = message
        self.timeout = timeout
        self.retry = retry
        # Step.__init__, inlined: a recovery issues thousands of these
        self.env = env
        self.ns = ns
        self.id = step_id = ns.next_step()
        self.target = target = ref.name
        self.hash, payload = message_digest(self.kind, target, message)
        self.record = record = lookup(env, step_id, self.kind, target, self.hash)
        self.issued = 0.0
        trace = env.trace
        if trace is not None:  # tracing on (actorflow[otel])
            self.span = trace.step(self.kind, step_id, target, record is not None)
        if record is None:  # a replayed step never reaches its agent
            self.issued = wall_clock()
            if env.config.record_messages:
                self._payload = payload
            tried = env.view.milestones.get(f"{env.run_id}/{step_id}{ATTEMPTS}")
            if tried is not None:  # attempts a crash interrupted: go on after them
                log = decode(tried.data, AttemptLog, "attempts of step", step_id)
                self._errors, self._due = log.errors, log.due
            self._meta = self._make_meta(len(self._errors) + 1)
        ns.pending[step_id] = self

    def _make_meta(self, attempt: int) -> StepMeta:
        run_id = self.env.run_id
        key = f"{run_id}/{self.id}"
        info = StepInfo(run_id=run_id, step_id=self.id, key=key, attempt=attempt)
        progress = self.env.view.milestones.get(key)
        meta = StepMeta(info, self._save_milestone, progress.data if progress else None)
        if self.span is not None:  # the handler's span is a child of the step's
            traced_handler(self.span, meta)
        return meta

    async def _save_milestone(self, data: bytes) -> None:
        rec = self.env.recorder
        key = f"{self.env.run_id}/{self.id}"
        rec.record(MilestoneRecord(key=key, agent=self.ref.name, data=data))
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
        type_ = reply_type(self.ref.actor_type, type(self.message))
        value: T = decode(result or b"\xc0", type_, "reply of step", self.id)
        return value

    async def _deliver(self) -> None:
        rec = self.env.recorder
        if rec.barrier_needed():
            await rec.output_barrier()
        if self._due:  # a recovered retry waits out the rest of its backoff
            clock = self.env.flow.clock
            await clock.sleep(self._due - clock.now())
        try:
            await self._redeliver()
        except ActorError as exc:
            # a stopped agent, say: handled with the task's retries in _live
            self._deliver_error = exc

    async def _redeliver(self) -> None:
        limiter = self.env.flow.limiter_for(self.ref.actor_type, type(self.message))
        permit: Permit | None = None
        if limiter is not None:
            self._limiter = limiter
            if not limiter.try_take():  # taken at once, with nothing to carry back: no permit
                # waiting here is no attempt, and no ask_timeout runs yet
                permit = await limiter.acquire()
        turnstile = self.turnstile = _turnstile(self.env, self.ref.name)
        self.ticket = turnstile.take()
        self.pending = None
        try:
            self.pending = pending = await self.ref.deliver(self.message, self._meta)
        except BaseException:
            self._release(turnstile)
            if permit is not None:
                permit.release()
            elif limiter is not None:
                limiter.give_back()
            raise
        if permit is not None:
            self._hold(pending, permit)
        elif limiter is not None:
            pending.notify = limiter.on_reply
            if pending.event.is_set():
                limiter.give_back()

    def _hold(self, pending: AgentReply, permit: Permit) -> None:
        """Give ``permit`` back, with the tokens the handler reported, once the reply is in."""
        meta = self._meta
        if meta is not None:
            permit.metrics = meta.metrics
            if permit.waited > 0:
                meta.metrics["limit_wait"] = meta.metrics.get("limit_wait", 0.0) + permit.waited
        trace = self.env.trace
        if permit.waited > 0 and trace is not None and self._limiter is not None:
            trace.limit_wait(self._limiter.limit.name, permit.waited)
        pending.notify = permit.on_reply
        if pending.event.is_set():
            permit.release()

    def _release(self, turnstile: Turnstile) -> None:
        if self.ticket >= 0:
            turnstile.release(self.ticket)
            self.ticket = -1

    def abandon(self) -> None:
        """Give up a delivered step that will never be finished (its gather was cancelled)."""
        if self.ticket >= 0 and self.turnstile is not None:
            self._release(self.turnstile)

    def answered(self) -> bool:
        """Whether the step is delivered and its reply is in, without an error."""
        pending = self.pending
        return pending is not None and pending.event.is_set() and pending.error is None

    def gathers_inline(self) -> bool:
        """Whether ``ctx.gather`` may record it with ``record_as_answered``.

        So may a delivered ask without a timeout: one whose outcome is its
        reply, whenever that comes in.
        """
        return not self.timeout and self.pending is not None and not self._errors

    def in_turn(self) -> bool:
        """Whether every earlier message to its agent is recorded (or given up)."""
        return self.turnstile is not None and self.turnstile.ready(self.ticket)

    async def _live(self) -> T:
        turnstile = _turnstile(self.env, self.ref.name)
        try:
            reply, state, attempt = await self._outcome(turnstile)
            if not turnstile.ready(self.ticket):
                await turnstile.wait(self.ticket)
            await self._record_success(reply, state, attempt)
        finally:
            self._release(turnstile)
            self._done()
        await self.env.recorder.after_step()
        return reply  # type: ignore[no-any-return]

    async def finish_answered(self) -> T:
        """``finish`` for a step whose reply is in (``answered``), without the sync flush.

        ``ctx.gather`` records such steps in order, in its own task, and makes
        them durable together (one flush) in ``sync`` mode.
        """
        turnstile = self.turnstile
        pending = self.pending
        assert turnstile is not None
        assert pending is not None
        try:
            if not turnstile.ready(self.ticket):
                await turnstile.wait(self.ticket)
            await self._settle()
            await self._record_success(pending.value, pending.state, 1)
        finally:
            self._release(turnstile)
            self._done()
        return pending.value  # type: ignore[no-any-return]

    def _policy(self) -> RetryPolicy:
        """The step's retry policy: the call's, the handler's, the class's or the runtime's."""
        if self.retry is not None:
            return self.retry
        retry, _ = agent_flow(self.ref.actor_type, type(self.message))
        return retry if retry is not None else self.env.config.retry_policy

    async def _outcome(self, turnstile: Turnstile) -> tuple[Any, bytes, int]:
        """The reply and state, retrying a failed task; records the final failure."""
        policy = self._policy()
        errors = list(self._errors)
        attempt = len(errors) + 1
        handler_error: BaseException | None = None
        while True:
            try:
                if self._deliver_error is not None:
                    error, self._deliver_error = self._deliver_error, None
                    raise error
                if self.pending is None:  # a retry (the first delivery happened in start)
                    await self._redeliver()
                pending = self.pending
                assert pending is not None
                if self.timeout:
                    with anyio.fail_after(self.timeout):
                        await pending.event.wait()
                elif not pending.event.is_set():
                    await pending.event.wait()
                if pending.error is not None:
                    raise pending.error
                await self._settle()
                self._errors = tuple(errors)
                return pending.value, pending.state, attempt
            except (ActorError, TimeoutError) as exc:
                await self._settle()
                cause: BaseException = exc
                if isinstance(exc, ActorFailedError):
                    handler_error = exc  # the root cause, worth more than a later "stopped"
                    cause = exc.error
                errors.append(ErrorInfo.of(cause))
                retryable = policy.retries(cause) if cause is not exc else True
                if not retryable or attempt >= policy.max_attempts:
                    await turnstile.wait(self.ticket)
                    self._errors = tuple(errors)
                    raise await self._record_failure(handler_error or exc, attempt) from exc
                self._release(turnstile)
                self.pending = None
                clock = self.env.flow.clock
                delay = policy.backoff(attempt, cause)
                await self._note_attempts(tuple(errors), clock.now() + delay)
                await clock.sleep(delay)
                attempt += 1
                self._meta = self._make_meta(attempt)

    async def _note_attempts(self, errors: tuple[ErrorInfo, ...], due: float) -> None:
        """Make the failed attempts durable before the backoff: a recovery goes on after them."""
        rec = self.env.recorder
        key = f"{self.env.run_id}/{self.id}{ATTEMPTS}"
        data = encode(AttemptLog(errors=errors, due=due), "attempts of step", self.id)
        rec.record(MilestoneRecord(key=key, agent=self.ref.name, data=data))
        await rec.flush()

    async def _settle(self) -> None:
        limiter = self._limiter
        if limiter is not None and limiter.owes:
            await limiter.settle()

    async def _record_success(self, reply: object, state: bytes, attempts: int) -> None:
        """Record the step's reply and the agent's new state (not flushed: see ``_live``)."""
        agents = self.env.agents
        name = self.ref.name
        ref: StateRef | None = None
        if self.ref.scope == self.env.run_id:
            # only the run's own agents are restored from its records; an actor
            # of the runtime outlives runs and keeps its own state
            if agents.needs_blob(name, state):
                ref = await agents.state_ref(name, state)
            else:
                ref = agents.inline_state_ref(name, state)
        result = None if self.kind == "send" else encode(reply, "reply of", name)
        message = await self._message_ref() if self._payload is not None else None
        self._record_outcome(
            message=message,
            result=result,
            metrics=self._metrics(),
            state=ref,
            attempts=attempts,
            attempt_errors=self._errors,
        )

    async def _message_ref(self) -> MessageRef:
        """The message as its record keeps it: inline when small, else a blob of the run's."""
        payload = self._payload
        assert payload is not None
        self._payload = None
        name = class_name(type(self.message))
        if len(payload) <= INLINE_MESSAGE_BYTES:
            return MessageRef(type=name, data=payload)
        # the blob must be durable before any record that points at it
        rec = self.env.recorder
        return MessageRef(type=name, blob=await rec.store.put_blob(rec.run_id, payload))

    async def _record_failure(self, exc: BaseException, attempts: int) -> StepFailedError:
        cause = exc.__cause__ if exc.__cause__ is not None else exc
        error = ErrorInfo.of(cause)
        rec = self.env.recorder
        self._record_outcome(
            message=await self._message_ref() if self._payload is not None else None,
            error=error,
            metrics=self._metrics(),
            attempts=attempts,
            attempt_errors=self._errors,
        )
        rec.emit("step_failed", step_id=self.id, agent=self.ref.name, error=error.type)
        await rec.after_step()
        return self.failure(error)


class SendStep(AskStep[None]):
    """``ctx.send``: done once delivered; the agent's handling is recorded in the background.

    The enclosing phase (or the run) waits for that record before it ends.
    """

    kind = "send"

    def gathers_inline(self) -> bool:
        return False  # done once delivered: its record is made in the background

    async def finish(self) -> None:
        record = self.record
        if record is not None:
            if record.error is not None:
                raise self.failure(record.error)
            return
        ns = self.ns
        done = anyio.Event()
        ns.sends.append(done)

        async def complete() -> None:
            try:
                await self._live()
            except StepFailedError as exc:
                ns.failed_sends.append(exc)
            finally:
                done.set()

        self.env.task_group.start_soon(complete)

    def _decode(self, result: bytes | None) -> None:
        return None


# --- ctx.gather's fast path ------------------------------------------------------


async def record_as_answered(
    recorder: Recorder,
    asks: list[tuple[int, AskStep[Any]]],
    outcomes: list[Any],
    failed: list[BaseException | None],
) -> list[tuple[int, AskStep[Any]]]:
    """Record asks (``gathers_inline``) as their replies come in; return those left when one failed.

    Each is recorded in this task, once its agent's earlier records are in,
    and made durable then in ``sync`` mode (one flush per round). The result
    or error of ask ``i`` goes to ``outcomes[i]`` or ``failed[i]``.
    """
    watch = _Watch(asks)
    by_reply = {id(aw.pending): (i, aw) for i, aw in asks}
    # replies in before the watch was set, then as they arrive (no rescans)
    answered = [(i, aw) for i, aw in asks if aw.answered()]
    left = {i for i, _ in asks}
    try:
        while left and not watch.failed:
            answered += [by_reply[id(r)] for r in watch.take_arrived() if r.error is None]
            ready = [(i, aw) for i, aw in answered if aw.in_turn()]
            if not ready:
                if not answered:
                    await watch.wait_any()
                    continue
                # its agent has an earlier record to come, from another task: wait for it
                ready = answered[:1]
            for i, aw in ready:
                try:
                    outcomes[i] = await aw.finish_answered()
                except Exception as exc:
                    failed[i] = exc
                left.discard(i)
            answered = [(i, aw) for i, aw in answered if i in left]
            await recorder.after_step()  # durable as they come in, in sync mode
    except BaseException:
        for i, aw in asks:
            if i in left:
                aw.abandon()
        raise
    finally:
        watch.take_arrived()  # the replies point at the watch: leave no cycle behind
    return [(i, aw) for i, aw in asks if i in left]


class _Watch:
    """Wakes a gather's recording task whenever one of its replies comes in."""

    __slots__ = ("_arrived", "_wake", "failed")

    def __init__(self, live: list[tuple[int, AskStep[Any]]]) -> None:
        self.failed = False
        self._arrived: list[AgentReply] = []
        self._wake: anyio.Event | None = None
        for _, aw in live:
            pending = aw.pending
            if pending is not None:
                if pending.error is not None:
                    self.failed = True
                held = pending.notify
                if held is None:
                    pending.notify = self._notify
                else:  # the step's limit is given back with the reply too
                    pending.notify = _both(held, self._notify)

    async def wait_any(self) -> None:
        """Until another reply is in (or failed)."""
        self._wake = anyio.Event()
        try:
            await self._wake.wait()
        finally:
            self._wake = None

    def take_arrived(self) -> list[AgentReply]:
        """The replies that came in since the last call."""
        arrived, self._arrived = self._arrived, []
        return arrived

    def _notify(self, reply: AgentReply) -> None:
        if reply.error is not None:
            self.failed = True
        self._arrived.append(reply)
        if self._wake is not None:
            self._wake.set()


def _both(
    first: Callable[[AgentReply], object], second: Callable[[AgentReply], object]
) -> Callable[[AgentReply], object]:
    def notify(reply: AgentReply) -> None:
        first(reply)
        second(reply)

    return notify
