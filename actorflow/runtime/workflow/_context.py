"""``RunContext``: everything in a run that could differ if its code ran again.

Each call issues a step (``_steps.py``) with a deterministic id; awaiting it
either returns the recorded outcome (a step that completed before a crash
never runs again) or runs it live and records it. Only traffic through ``ctx``
is durable: messages sent straight through an ``ActorRef`` are not recorded.
"""

from __future__ import annotations

import random as _random
import time
import uuid as _uuid
from typing import TYPE_CHECKING, Any, TypeVar, overload

from actorflow.runtime.workflow._gather import gather_steps
from actorflow.runtime.workflow._ids import Namespace, current_namespace
from actorflow.runtime.workflow._phases import RetryPhase, run_phase
from actorflow.runtime.workflow._steps import (
    AskStep,
    DecideStep,
    EmitStep,
    PatchStep,
    SendStep,
    SleepStep,
    SpawnStep,
    Step,
    ValueStep,
    WaitStep,
)
from actorflow.runtime.workflow._triggers import manual_trigger

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Generator, Mapping, Sequence

    from actorflow.runtime.actors import Actor, ActorRef, AgentRef, Request
    from actorflow.runtime.workflow._env import StepEnv
    from actorflow.storage import DecisionRecord

__all__ = ["RunContext"]

T = TypeVar("T")
R = TypeVar("R")
A = TypeVar("A", bound="Actor")
T1 = TypeVar("T1")
T2 = TypeVar("T2")
T3 = TypeVar("T3")
T4 = TypeVar("T4")


class RunContext:
    """The run's handle on durable steps. Users receive it; they never build it."""

    __slots__ = ("_env", "_patches", "_root", "run_id")

    def __init__(self, env: StepEnv) -> None:
        self.run_id = env.run_id
        self._env = env
        self._root = Namespace("")
        self._patches: dict[str, bool] = {}

    @property
    def root(self) -> Namespace:
        """The run's top-level namespace (steps issued outside any phase)."""
        return self._root

    def _ns(self) -> Namespace:
        return current_namespace(self._root)

    # --- agents --------------------------------------------------------------

    @overload
    def ask(
        self,
        ref: AgentRef,
        message: Request[R],
        *,
        timeout: float | None = None,
    ) -> Step[R]: ...
    @overload
    def ask(
        self,
        ref: AgentRef,
        message: object,
        *,
        timeout: float | None = None,
    ) -> Step[object]: ...
    def ask(
        self,
        ref: AgentRef,
        message: object,
        *,
        timeout: float | None = None,
    ) -> Step[Any]:
        """Ask an agent and return its reply, recorded; replays return the record.

        A ``Request[R]`` message makes the step's result an ``R`` for type
        checkers; any other message's reply is an ``object`` to narrow. The
        agent's task is retried ``step_retries`` times with backoff (the same
        idempotency key); then the step fails with ``StepFailedError``.
        """
        if timeout is None:
            timeout = self._env.config.ask_timeout
        return AskStep(self._env, self._ns(), ref, message, timeout)

    def send(self, ref: AgentRef, message: object) -> Step[None]:
        """Send to an agent without waiting for its reply.

        Awaiting returns once the message is delivered. The agent's handling
        is recorded when it completes; the enclosing phase waits for it.
        """
        return SendStep(self._env, self._ns(), ref, message, None)

    def spawn(self, cls: type[A], *, name: str, state: object = None) -> Step[ActorRef[A]]:
        """Get or create the run's agent ``name`` of class ``cls``.

        Names are scoped to the run. Raises (when awaited) ``DuplicateActorNameError``
        if the run already has an agent of that name with another class.
        """
        return SpawnStep(self._env, self._ns(), cls, name, state)

    @overload
    async def gather(self, s1: Awaitable[T1], /) -> list[T1]: ...
    @overload
    async def gather(self, s1: Awaitable[T1], s2: Awaitable[T2], /) -> list[T1 | T2]: ...
    @overload
    async def gather(
        self, s1: Awaitable[T1], s2: Awaitable[T2], s3: Awaitable[T3], /
    ) -> list[T1 | T2 | T3]: ...
    @overload
    async def gather(
        self, s1: Awaitable[T1], s2: Awaitable[T2], s3: Awaitable[T3], s4: Awaitable[T4], /
    ) -> list[T1 | T2 | T3 | T4]: ...
    @overload
    async def gather(self, *steps: Awaitable[T]) -> list[T]: ...
    async def gather(self, *steps: Awaitable[Any]) -> list[Any]:
        """Await steps (and phase calls) concurrently; results in argument order.

        Messages are delivered in step order. Raises the first failure in
        argument order (not an exception group), after the others finished.
        """
        return await gather_steps(self._env.recorder, steps)

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
        return await DecideStep(
            self._env,
            self._ns(),
            type,
            description=description,
            rationale=rationale,
            confidence=confidence,
            alternatives=alternatives,
            agent=agent,
        )

    # --- values that differ between runs ---------------------------------------

    def now(self) -> Step[float]:
        """The wall-clock time (seconds since the epoch), recorded."""
        return ValueStep(self._env, self._ns(), "now", time.time, float)

    def random(self) -> Step[float]:
        """A random float in [0, 1), recorded.

        Drawn from a generator seeded with the run id and the step id, so a
        run started again under the same id (a test, a fork) draws the same.
        """
        ns = self._ns()
        seed = f"{self.run_id}/{ns.peek_step()}"
        return ValueStep(self._env, ns, "random", lambda: _random.Random(seed).random(), float)

    def uuid(self) -> Step[str]:
        """A random UUID (hex), recorded."""
        return ValueStep(self._env, self._ns(), "uuid", lambda: _uuid.uuid4().hex, str)

    async def sleep(self, seconds: float) -> None:
        """A durable timer: after a crash the run waits only for what is left."""
        await SleepStep(self._env, self._ns(), seconds)

    # --- waiting for the outside world -------------------------------------------

    async def wait_for_input(self, prompt: str) -> str:
        """Pause the run until ``runtime.resume(run_id, response)`` answers ``prompt``.

        The first time, this records the request, takes a snapshot and ends
        the run's tasks: ``runtime.run`` raises ``RunPaused``. On resume the
        run replays to here and this returns the response.
        """
        return await WaitStep(self._env, self._ns(), "input", prompt.encode(), str)

    # --- evolving code ---------------------------------------------------------

    def patched(self, change_id: str) -> bool:
        """Whether this run takes the new code path ``change_id``.

        True for runs that reach this point after the change was deployed;
        False for runs recorded before it (they replay the old path).
        """
        taken = self._patches.get(change_id)
        if taken is None:
            taken = self._patches[change_id] = PatchStep(self._env, self._ns(), change_id).taken
        return taken

    def retry_phase(self) -> None:
        """Start the enclosing phase over (a new attempt; its steps get new ids)."""
        raise RetryPhase

    def checkpoint(self, reason: str = "manual") -> None:
        """Ask for a snapshot now (asynchronous; coalesces with queued requests)."""
        self._env.recorder.snapshot(manual_trigger(reason))

    @property
    def metrics(self) -> Mapping[str, float]:
        """The run's counters so far: steps, api_calls, tokens, what agents report."""
        return dict(self._env.view.metrics)

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
        return run_phase(self._env, phase_id, name, fn, args, kwargs, result_type)

    # --- streamed events ---------------------------------------------------------

    def emit(
        self, event: object, *, durable: bool = False, agent: str = "orchestrator"
    ) -> Awaitable[None]:
        """Stream ``event`` to the run's readers; await the result.

        Without ``durable`` this is the orchestrator's ``self.emit(event)``:
        passed at once to this process's ``handle.events()`` readers, never
        recorded (a recovery that runs the code again emits it again); it
        issues no step, and awaiting it returns at once.

        With ``durable=True`` it is a step: the event (msgspec-encodable) is
        recorded in the run's log, where ``runtime.watch`` and
        ``actorflow log --follow`` see it from any process, and passed to
        this process's readers. It is recorded once: a replay neither records
        nor delivers it again. Only its type is checked on replay.

        Raises:
            EncodingError: (durable) the event cannot be encoded; raised by this call.

        .. versionadded:: 0.2
        """
        if durable:
            return EmitStep(self._env, self._ns(), event, agent, self._env.publish)
        publish = self._env.publish
        if publish is not None:
            publish(agent, event)
        return _DONE


class _Done:
    """An awaitable that is already done (an ephemeral ``ctx.emit``)."""

    __slots__ = ()

    def __await__(self) -> Generator[Any, None, None]:
        return
        yield


_DONE = _Done()
