"""``RunContext``: everything in a run that could differ if its code ran again.

Each call issues a step with a deterministic id; awaiting it either returns
the recorded outcome (a step that completed before a crash never runs again)
or runs it live and records it. Only traffic through ``ctx`` is durable:
messages sent straight through an ``ActorRef`` are not recorded.
"""

from __future__ import annotations

import random as _random
import time
import uuid as _uuid
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, TypeVar

import anyio
import msgspec

from actorflow.errors import (
    EncodingError,
    NonDeterminismError,
    UnawaitedStepError,
)
from actorflow.runtime.workflow._gather import PauseRun, SendStep, gather_steps
from actorflow.runtime.workflow._ids import Namespace, call_site
from actorflow.runtime.workflow._recorder import decode, encode
from actorflow.runtime.workflow._steps import AskStep, Step, ValueStep
from actorflow.storage import DecisionRecord, EventRecord

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Mapping, Sequence

    from actorflow.runtime.workflow._config import RuntimeConfig
    from actorflow.runtime.workflow._recorder import Recorder
    from actorflow.runtime.workflow._replay import RunView

__all__ = ["PauseRun", "RetryPhase", "RunContext"]

T = TypeVar("T")
_namespace: ContextVar[Namespace | None] = ContextVar("actorflow_namespace", default=None)


class RetryPhase(BaseException):
    """Raised by ``ctx.retry_phase()``; the enclosing phase catches it and starts over."""


class RunContext:
    """The run's handle on durable steps. Users receive it; they never build it."""

    def __init__(
        self,
        *,
        run_id: str,
        recorder: Recorder,
        config: RuntimeConfig,
        runner: Any,
    ) -> None:
        self.run_id = run_id
        self._recorder = recorder
        self._view: RunView = recorder.view
        self._config = config
        self._runner = runner
        self._root = Namespace("")
        self._patches: dict[str, bool] = {}

    # --- namespaces ----------------------------------------------------------

    def _ns(self) -> Namespace:
        ns = _namespace.get()
        return ns if ns is not None else self._root

    # --- agents --------------------------------------------------------------

    def ask(self, ref: Any, message: Any, *, timeout: float | None = None) -> Step[Any]:
        """Ask an agent and return its reply, recorded; replays return the record.

        The agent's task is retried ``step_retries`` times with backoff (the
        same idempotency key); then the step fails with ``StepFailedError``.
        """
        if timeout is None:
            timeout = self._config.ask_timeout
        return AskStep(self, self._ns(), ref, message, timeout)

    def send(self, ref: Any, message: Any) -> Step[None]:
        """Send to an agent without waiting for its reply.

        Awaiting returns once the message is delivered. The agent's handling
        is recorded when it completes; the enclosing phase waits for it.
        """
        step: AskStep[Any] = AskStep(self, self._ns(), ref, message, None, wait=False)
        return SendStep(step)  # type: ignore[return-value]

    def spawn(self, cls: type[T], *, name: str, state: Any = None) -> Step[Any]:
        """Get or create the run's agent ``name`` of class ``cls``.

        Names are scoped to the run. Raises (when awaited) ``TypeError`` if
        the run already has an agent of that name with another class.
        """
        step: Step[Any] = self._runner.spawn_step(self, self._ns(), cls, name, state)
        return step

    async def gather(self, *steps: Awaitable[Any]) -> list[Any]:
        """Await steps (and phase calls) concurrently; results in argument order.

        Messages are delivered in step order. Raises the first failure in
        argument order (not an exception group), after the others finished.
        """
        return await gather_steps(self._recorder, steps)

    # --- decisions -----------------------------------------------------------

    async def decide(
        self,
        type: str,
        *,
        description: str = "",
        rationale: str = "",
        confidence: float | None = None,
        alternatives: Sequence[str] = (),
        agent: str = "orchestrator",
    ) -> DecisionRecord:
        """Record a decision and why it was made; visible only once durable."""
        ns = self._ns()
        step_id = ns.next_step()
        recorded = self._view.decided.get(step_id)
        if recorded is not None:
            if recorded.type != type:
                raise NonDeterminismError(
                    self.run_id,
                    step_id,
                    f"decision {recorded.type}",
                    f"decision {type}",
                    call_site(),
                )
            return recorded
        if step_id in self._view.steps:
            old = self._view.steps[step_id]
            raise NonDeterminismError(
                self.run_id,
                step_id,
                f"{old.kind} {old.target or ''}",
                f"decision {type}",
                call_site(),
            )
        fields = {
            "step_id": step_id,
            "agent": agent,
            "type": type,
            "description": description,
            "rationale": rationale,
            "confidence": confidence,
            "alternatives": tuple(alternatives),
            "time": time.time(),
        }
        try:
            # Structs do not check types when built; a wrong one would be
            # written now and refuse to load at recovery.
            record = msgspec.convert(fields, DecisionRecord)
        except msgspec.ValidationError as exc:
            raise EncodingError(f"decision {type!r}", str(exc)) from None
        self._recorder.record(record)
        self._recorder.emit("decision_made", step_id=step_id, decision=type, confidence=confidence)
        await self._recorder.output_barrier()
        return record

    # --- values that differ between runs ---------------------------------------

    def now(self) -> Step[float]:
        """The wall-clock time (seconds since the epoch), recorded."""
        return ValueStep(self, self._ns(), "now", time.time, float)

    def random(self) -> Step[float]:
        """A random float in [0, 1), recorded.

        Drawn from a generator seeded with the run id and the step id, so a
        run started again under the same id (a test, a fork) draws the same.
        """
        ns = self._ns()
        seed = f"{self.run_id}/{ns.peek_step()}"
        return ValueStep(self, ns, "random", lambda: _random.Random(seed).random(), float)

    def uuid(self) -> Step[str]:
        """A random UUID (hex), recorded."""
        return ValueStep(self, self._ns(), "uuid", lambda: _uuid.uuid4().hex, str)

    async def sleep(self, seconds: float) -> None:
        """A durable timer: after a crash the run waits only for what is left."""
        step: ValueStep[float] = ValueStep(
            self, self._ns(), "sleep", lambda: time.time() + seconds, float
        )
        deadline = await step
        if step.record is None:
            await self._recorder.flush()
        await anyio.sleep(max(0.0, deadline - time.time()))

    # --- human input -----------------------------------------------------------

    async def wait_for_input(self, prompt: str) -> str:
        """Pause the run until ``runtime.resume(run_id, response)`` answers ``prompt``.

        The first time, this records the request, takes a snapshot and ends
        the run's tasks: ``runtime.run`` raises ``RunPaused``. On resume the
        run replays to here and this returns the response.
        """
        ns = self._ns()
        step_id = ns.next_step()
        record = self._view.steps.get(step_id)
        if record is not None:
            if record.kind != "input":
                raise NonDeterminismError(
                    self.run_id, step_id, f"{record.kind}", "wait_for_input", call_site()
                )
            return decode(record.result or b"\xc0", str, f"input of step {step_id}")  # type: ignore[no-any-return]
        self._recorder.record(
            EventRecord(kind="input_requested", step_id=step_id, data=prompt.encode())
        )
        await self._recorder.flush()
        raise PauseRun(step_id, prompt)

    # --- evolving code ---------------------------------------------------------

    def patched(self, change_id: str) -> bool:
        """Whether this run takes the new code path ``change_id``.

        True for runs that reach this point after the change was deployed;
        False for runs recorded before it (they replay the old path).
        """
        if change_id in self._patches:
            return self._patches[change_id]
        ns = self._ns()
        step_id = ns.peek_step()
        marker = self._view.events.get(step_id)
        if marker is not None and marker.kind == "patch":
            ns.next_step()
            taken = marker.data == change_id.encode()
        elif step_id in self._view.steps or step_id in self._view.decided:
            taken = False  # the old code issued a step here: this run predates the change
        else:
            ns.next_step()
            self._recorder.record(
                EventRecord(kind="patch", step_id=step_id, data=change_id.encode())
            )
            taken = True
        self._patches[change_id] = taken
        return taken

    def retry_phase(self) -> None:
        """Start the enclosing phase over (a new attempt; its steps get new ids)."""
        raise RetryPhase

    def checkpoint(self, reason: str = "manual") -> None:
        """Ask for a snapshot now (asynchronous; coalesces with queued requests)."""
        self._recorder.snapshot(f"manual:{reason}")

    @property
    def metrics(self) -> Mapping[str, float]:
        """The run's counters so far: steps, api_calls, tokens, what agents report."""
        return dict(self._view.metrics)

    # --- phases --------------------------------------------------------------

    def phase(
        self,
        name: str,
        fn: Callable[..., Awaitable[T]],
        *args: Any,
        result_type: Any = Any,
        **kwargs: Any,
    ) -> Awaitable[T]:
        """Run ``fn(*args, **kwargs)`` as a memoised phase named ``name``.

        The phase's id is issued now. A phase that finished before a crash
        returns its recorded result without running.
        """
        phase_id = self._ns().next_phase(name)
        return self._run_phase(phase_id, name, fn, args, kwargs, result_type)

    async def _run_phase(
        self,
        phase_id: str,
        name: str,
        fn: Callable[..., Awaitable[T]],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        result_type: Any,
    ) -> T:
        done = self._view.phases.get(phase_id)
        if done is not None:
            return decode(done.result, result_type, f"result of phase {phase_id}")  # type: ignore[no-any-return]
        rec = self._recorder
        attempt = 0
        while True:
            ns = Namespace(phase_id if attempt == 0 else f"{phase_id}@{attempt}")
            token = _namespace.set(ns)
            rec.view.phase = name
            rec.emit("phase_started", phase=name, phase_id=phase_id, attempt=attempt)
            if ns.peek_step() not in self._view.steps:
                # A phase re-entered by a recovery already had its start
                # snapshot; taking one now would only slow the replay down.
                rec.snapshot("phase_start")
            try:
                result = await fn(*args, **kwargs)
            except RetryPhase:
                attempt += 1
                rec.record(EventRecord(kind="phase_retry", step_id=ns.path))
                continue
            finally:
                _namespace.reset(token)
            await self._close_namespace(ns)
            break
        from actorflow.storage import PhaseEndRecord

        rec.record(
            PhaseEndRecord(
                phase_id=phase_id, name=name, result=encode(result, f"result of phase {name}")
            )
        )
        if rec.durability.value == "phase":
            await rec.flush()
        rec.emit("phase_ended", phase=name, phase_id=phase_id)
        rec.snapshot("phase_end")
        return result

    async def _close_namespace(self, ns: Namespace) -> None:
        """End of a phase (or the run): sends finished, every step awaited."""
        await self._runner.wait_sends(ns)
        if ns.pending:
            ids = list(ns.pending)
            ns.pending.clear()
            raise UnawaitedStepError(self.run_id, ids)
