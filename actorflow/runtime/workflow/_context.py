"""``RunContext``: everything in a run that could differ if its code ran again.

Each call issues a step (``steps/``) with a deterministic id; awaiting it
either returns the recorded outcome (a step that completed before a crash
never runs again) or runs it live and records it. Only traffic through ``ctx``
is durable: messages sent straight through an ``ActorRef`` are not recorded.
"""

from __future__ import annotations

import random as _random
import time
import uuid as _uuid
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, overload

from actorflow.errors import ConfigurationError
from actorflow.runtime.workflow._gather import gather_steps
from actorflow.runtime.workflow._ids import Namespace, current_namespace
from actorflow.runtime.workflow._phases import RetryPhase, run_phase
from actorflow.runtime.workflow._triggers import manual_trigger
from actorflow.runtime.workflow._wait_records import signal_type
from actorflow.runtime.workflow.steps import (
    NO_DEFAULT,
    AskStep,
    DecideStep,
    EmitStep,
    PatchStep,
    SendStep,
    SleepStep,
    SpawnStep,
    StartChildStep,
    Step,
    ValueStep,
    WaitStep,
)

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Generator, Mapping, Sequence

    from actorflow.runtime.actors import Actor, ActorRef, AgentRef, Request
    from actorflow.runtime.flow import RetryPolicy
    from actorflow.runtime.workflow._children import OnParentCancel
    from actorflow.runtime.workflow._env import StepEnv
    from actorflow.runtime.workflow.steps import ChildRun
    from actorflow.storage import DecisionRecord

__all__ = ["RunContext", "Workflow"]

T = TypeVar("T")
R = TypeVar("R")
A = TypeVar("A", bound="Actor")
T1 = TypeVar("T1")
T2 = TypeVar("T2")
T3 = TypeVar("T3")
T4 = TypeVar("T4")
D = TypeVar("D")
I = TypeVar("I")  # noqa: E741
I_contra = TypeVar("I_contra", contravariant=True)
R_co = TypeVar("R_co", covariant=True)


class Workflow(Protocol[I_contra, R_co]):
    """An orchestrator class as ``start_child`` types it: ``run(ctx, input) -> result``."""

    def run(self, ctx: RunContext, input: I_contra, /) -> Awaitable[R_co]: ...


def _check_timeout(timeout: object) -> None:
    if timeout is not None and (
        isinstance(timeout, bool)
        or not isinstance(timeout, int | float)
        or not timeout > 0  # NaN too
    ):
        raise ConfigurationError("timeout", timeout, "a positive number of seconds, or None")


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
        retry: RetryPolicy | None = None,
    ) -> Step[R]: ...
    @overload
    def ask(
        self,
        ref: AgentRef,
        message: object,
        *,
        timeout: float | None = None,
        retry: RetryPolicy | None = None,
    ) -> Step[object]: ...
    def ask(
        self,
        ref: AgentRef,
        message: object,
        *,
        timeout: float | None = None,
        retry: RetryPolicy | None = None,
    ) -> Step[Any]:
        """Ask an agent and return its reply, recorded; replays return the record.

        A ``Request[R]`` message makes the step's result an ``R`` for type
        checkers; any other message's reply is an ``object`` to narrow. A
        failed task is retried (the same idempotency key) by ``retry``, else
        the handler's or the agent class's policy, else ``RuntimeConfig.retry``
        (see :class:`RetryPolicy`); then the step fails with
        ``StepFailedError``. Each attempt has ``timeout`` (default ``ask_timeout``);
        waiting for the handler's ``Limit`` does not count.
        """
        if timeout is None:
            timeout = self._env.config.ask_timeout
        return AskStep(self._env, self._ns(), ref, message, timeout, retry)

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

    @overload
    def wait_for(
        self, type: type[T], *, timeout: float | None = None, pause: bool = False
    ) -> Step[T]: ...
    @overload
    def wait_for(
        self, type: type[T], *, timeout: float | None = None, default: D, pause: bool = False
    ) -> Step[T | D]: ...
    def wait_for(
        self,
        type: type[Any],
        *,
        timeout: float | None = None,
        default: Any = NO_DEFAULT,
        pause: bool = False,
    ) -> Step[Any]:
        """Wait for one signal of ``type`` (``runtime.signal(run_id, message)``) and return it.

        Durable: the wait, its deadline and the message it takes are recorded,
        so a restart waits only for what is left and a replay returns the same
        message. Signals of ``type`` are taken in the order they were sent,
        each by one wait; waits started together (``ctx.gather``) take them in
        step order. With ``timeout`` (seconds), the wait returns ``default``
        at its deadline, or raises ``WaitTimeoutError`` if none is given.

        The run waits in this process; ``pause=True`` instead ends its tasks
        (``RunPaused``) unless a signal is already there, and the run goes on
        when ``resume`` or ``recover()`` takes it up again.

        Raises:
            WaitTimeoutError: the deadline passed and no ``default`` was given.
            ConfigurationError: ``timeout`` is not a positive number.
        """
        _check_timeout(timeout)
        return WaitStep(
            self._env,
            self._ns(),
            "wait",
            type,
            signal_type(type),
            timeout=timeout,
            default=default,
            prompt=None,
            pause=pause,
        )

    @overload
    def wait_for_input(self, prompt: str, *, timeout: float | None = None) -> Step[str]: ...
    @overload
    def wait_for_input(
        self, prompt: str, *, timeout: float | None = None, default: D
    ) -> Step[str | D]: ...
    def wait_for_input(
        self, prompt: str, *, timeout: float | None = None, default: Any = NO_DEFAULT
    ) -> Step[Any]:
        """Pause the run until a string answers ``prompt``; return it.

        A ``wait_for(str, pause=True)`` that shows ``prompt``: the run pauses
        (``runtime.run`` raises ``RunPaused``) unless a string signal is
        already waiting; ``runtime.resume(run_id, response)`` sends the
        response and runs it on, and ``runtime.signal(run_id, response)``
        leaves it for the next ``recover()``. With ``timeout``, a run still
        paused at its deadline goes on (at the next ``recover()``) with
        ``default``, or fails the wait with ``WaitTimeoutError``.
        """
        _check_timeout(timeout)
        return WaitStep(
            self._env,
            self._ns(),
            "input",
            str,
            signal_type(str),
            timeout=timeout,
            default=default,
            prompt=prompt,
            pause=True,
        )

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

    # --- child runs ------------------------------------------------------------

    def start_child(
        self,
        workflow: type[Workflow[I, R]],
        input: I,
        *,
        run_id: str | None = None,
        on_parent_cancel: OnParentCancel = "cancel",
    ) -> Step[ChildRun[R]]:
        """Start a child run of ``workflow`` on ``input``; return its handle, ``ChildRun``.

        The child is a run of its own (its own log, checkpoints and manifest,
        whose ``parent_run`` names this run), driven beside this one in the
        same runtime. Its id is ``run_id``, or one derived from this run's id
        and the step's, the same on every replay. Starting it is a step: a
        replay finds the child and never starts a second; a child orphaned by
        a crash is driven on (unless another live process drives it). Await
        ``handle.result()`` for its result.

        ``on_parent_cancel``: ``"cancel"`` (the default) cancels the child if
        this run ends cancelled while the child has not finished;
        ``"abandon"`` lets it run on.

        Raises:
            ConfigurationError: a bad ``on_parent_cancel``.
            InvalidRunIdError: a bad ``run_id``.
            EncodingError: ``input`` cannot be encoded.
            StepFailedError: (when awaited) a run ``run_id`` exists with another
                input.

        .. versionadded:: 0.3
        """
        return StartChildStep(
            self._env,
            self._ns(),
            self._ns,
            workflow,
            input,
            run_id=run_id,
            on_parent_cancel=on_parent_cancel,
        )

    async def run_child(
        self,
        workflow: type[Workflow[I, R]],
        input: I,
        *,
        run_id: str | None = None,
        on_parent_cancel: OnParentCancel = "cancel",
    ) -> R:
        """Run a child run to its end and return its result: ``start_child``, then ``result()``.

        Two steps: the child's start and the wait for its end (see
        :meth:`start_child` and ``ChildRun.result``).

        Raises:
            StepFailedError: the child failed or was cancelled (the message
                names the child run and its error).

        .. versionadded:: 0.3
        """
        child = await self.start_child(
            workflow, input, run_id=run_id, on_parent_cancel=on_parent_cancel
        )
        return await child.result()

    # --- streamed events ---------------------------------------------------------

    def emit(
        self, event: object, *, durable: bool = False, agent: str = "orchestrator"
    ) -> Awaitable[None]:
        """Stream ``event`` to the run's readers; await the result.

        Without ``durable`` this is the orchestrator's ``self.emit(event)``:
        passed at once to this process's ``handle.events()`` readers and to
        the store's event stream (``runtime.watch(run_id, events=True)``
        from other processes), never recorded (a recovery that runs the code
        again emits it again); it issues no step, and awaiting it returns at once.

        With ``durable=True`` it is a step: the event (msgspec-encodable) is
        recorded in the run's log, where ``runtime.watch`` and
        ``actorflow log --follow`` see it from any process, and passed to
        this process's readers. It is recorded once: a replay neither records
        nor delivers it again. Only its type is checked on replay.

        Raises:
            EncodingError: (durable) the event cannot be encoded; raised by this call.

        .. versionadded:: 0.2
        .. versionchanged:: 0.4
           Without ``durable``, also to the store's event stream.
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
