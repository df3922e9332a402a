"""Errors about one workflow run, and ``RunPaused``: a run waiting for input."""

from __future__ import annotations

from actorflow.errors._base import ActorflowError

__all__ = [
    "ForkEditError",
    "InvalidStateEditError",
    "MissingResponseError",
    "NonDeterminismError",
    "NondeterministicCallError",
    "RecoveryFailedError",
    "RunBlockedError",
    "RunError",
    "RunFailedError",
    "RunFinishedError",
    "RunInputMismatchError",
    "RunInputTypeError",
    "RunNotFinishedError",
    "RunNotFoundError",
    "RunPaused",
    "StepFailedError",
    "UnawaitedStepError",
    "UnknownEditedAgentError",
    "UpdateFailedError",
    "UpdateRejectedError",
    "WaitNotPendingError",
    "WaitTimeoutError",
]


class RunError(ActorflowError):
    """An error about one workflow run, named by ``run_id``."""

    def __init__(self, run_id: str, message: str) -> None:
        self.run_id = run_id
        super().__init__(message)


class RunNotFoundError(RunError, LookupError):
    """No run with this id is in the store."""

    def __init__(self, run_id: str) -> None:
        super().__init__(run_id, f"no run {run_id!r} in the store; `actorflow runs` lists them")


class RunNotFinishedError(RunError):
    """The run exists but has no result yet."""

    def __init__(self, run_id: str, status: str) -> None:
        self.status = status
        super().__init__(run_id, f"run {run_id!r} has not finished (status: {status})")


class RunNotPausedError(RunNotFinishedError):
    """``resume`` of a run that is not paused (a ``RunNotFinishedError`` for older code)."""

    def __init__(self, run_id: str, status: str) -> None:
        self.status = status
        RunError.__init__(
            self,
            run_id,
            f"run {run_id!r} is {status}, not paused: only a paused run can be resumed "
            f"(`actorflow result {run_id}` shows how it ended)",
        )


class RunFailedError(RunError):
    """The run ended in failure; ``error_type`` and ``error_message`` say why."""

    def __init__(self, run_id: str, error_type: str, error_message: str) -> None:
        self.error_type = error_type
        self.error_message = error_message
        super().__init__(run_id, f"run {run_id!r} failed: {error_type}: {error_message}")


class RunBlockedError(RunFailedError):
    """The run is ``blocked``: its code no longer replays its log (``NonDeterminismError``).

    The run is kept, not failed: code that replays its log (a rollback, or the
    change guarded with ``ctx.patched``) continues it with ``recover()``.
    A ``RunFailedError`` for code that catches those; ``error_type`` and
    ``error_message`` are the divergence as recorded, ``code_version`` the
    version of the code that diverged.

    .. versionadded:: 0.2
    """

    def __init__(
        self, run_id: str, error_type: str, error_message: str, code_version: str | None
    ) -> None:
        self.error_type = error_type
        self.error_message = error_message
        self.code_version = code_version
        under = f" under code_version {code_version!r}" if code_version is not None else ""
        RunError.__init__(
            self,
            run_id,
            f"run {run_id!r} is blocked{under}: {error_type}: {error_message}. Deploy code "
            "that replays its log (roll the change back, or guard it with ctx.patched), then "
            f"recover it: `actorflow recover {run_id}` or `runtime.recover({run_id!r})`; "
            "or fork it from a checkpoint before the change",
        )


class RunFinishedError(RunError):
    """A signal, update or cancel request reached a run that has already ended.

    ``status`` is how it ended (completed, failed, cancelled).

    .. versionadded:: 0.3
    """

    def __init__(self, run_id: str, status: str, what: str = "a signal") -> None:
        self.status = status
        super().__init__(
            run_id,
            f"run {run_id!r} has ended ({status}), so {what} cannot reach it: nothing will "
            f"take it. `actorflow result {run_id}` shows how it ended; start a new run instead",
        )


class WaitNotPendingError(RunError, LookupError):
    """An answer for a wait the run no longer has pending (answered, timed out, or it ended).

    ``step_id`` is the wait's step.

    .. versionadded:: 0.5
    """

    def __init__(self, run_id: str, step_id: str) -> None:
        self.step_id = step_id
        super().__init__(
            run_id,
            f"run {run_id!r} has no pending wait at step {step_id!r}: it was answered, its "
            "deadline passed, or the run ended; `actorflow show "
            f"{run_id} live` lists the waits it has",
        )


class ReservedInboxNameError(RunError, ValueError):
    """A signal's type name or id lies in the namespace actorflow keeps for its own inbox entries.

    Updates, their replies, cancel requests, ``resume`` answers and child
    runs' ends travel through the same inbox as signals; their names are
    actorflow's, so that no signal is ever read as one of them.

    .. versionadded:: 0.4
    """

    def __init__(self, run_id: str, what: str, value: str, reserved: str) -> None:
        self.what = what
        self.value = value
        how = (
            "give the class another name, or set `__actorflow_name__` on it"
            if what == "type name"
            else "use another id"
        )
        super().__init__(
            run_id,
            f"a signal's {what} {value[:80]!r} starts with {reserved!r}, which actorflow keeps "
            f"for its own inbox entries: {how}",
        )


class SignalTooLargeError(RunError, ValueError):
    """A signal or update is larger than ``RuntimeConfig.max_signal_size``.

    .. versionadded:: 0.4
    """

    def __init__(self, run_id: str, size: int, limit: int) -> None:
        self.size = size
        self.limit = limit
        super().__init__(
            run_id,
            f"the message for run {run_id!r} encodes to {size} bytes, over the limit of {limit}; "
            "send a reference to the data (a path, a key) instead, or raise "
            "max_signal_size (ACTORFLOW_MAX_SIGNAL_SIZE)",
        )


class UpdateRejectedError(RunError):
    """The run refused an update before recording anything: its validator raised, or no handler.

    .. versionadded:: 0.3
    """

    def __init__(self, run_id: str, update_id: str, reason: str) -> None:
        self.update_id = update_id
        self.reason = reason
        super().__init__(run_id, f"run {run_id!r} rejected update {update_id!r}: {reason}")


class UpdateFailedError(RunError):
    """An accepted update's handler raised; ``error_type`` and ``error_message`` as recorded.

    .. versionadded:: 0.3
    """

    def __init__(self, run_id: str, update_id: str, error_type: str, error_message: str) -> None:
        self.update_id = update_id
        self.error_type = error_type
        self.error_message = error_message
        super().__init__(
            run_id, f"update {update_id!r} of run {run_id!r} failed: {error_type}: {error_message}"
        )


class WaitTimeoutError(RunError, TimeoutError):
    """A ``ctx.wait_for`` reached its deadline with no message and no ``default``.

    The timeout is recorded, so a replay raises it again at the same step.

    .. versionadded:: 0.3
    """

    def __init__(self, run_id: str, step_id: str, type_name: str, timeout: float | None) -> None:
        self.step_id = step_id
        self.type_name = type_name
        self.timeout = timeout
        after = f" after {timeout:g}s" if timeout is not None else ""
        super().__init__(
            run_id,
            f"step {step_id}: no {type_name} signal arrived{after}; pass default=... to "
            "ctx.wait_for to go on without one, or catch WaitTimeoutError",
        )


class RunInputMismatchError(RunError):
    """A run id was reused with an input different from the stored one."""

    def __init__(self, run_id: str) -> None:
        super().__init__(
            run_id,
            f"run {run_id!r} exists with a different input; a run id names one run — "
            "use a new id for new input",
        )


class RunInputTypeError(RunError, TypeError):
    """A run's input does not fit the input type its workflow declares; nothing was stored."""

    def __init__(self, run_id: str, workflow: str, expected: str, given: str, cause: str) -> None:
        self.workflow = workflow
        self.expected = expected
        self.given = given
        super().__init__(
            run_id,
            f"workflow {workflow} takes {expected} as its input, not {given} ({cause}); "
            f"run {run_id!r} was not stored: pass a value of type {expected}",
        )


class StepFailedError(RunError):
    """A step failed; ``error_type`` and ``error_message`` are as recorded in the log.

    Live and replayed failures raise the same error, built from the record.
    """

    def __init__(self, run_id: str, step_id: str, error_type: str, error_message: str) -> None:
        self.step_id = step_id
        self.error_type = error_type
        self.error_message = error_message
        super().__init__(run_id, f"step {step_id} failed: {error_type}: {error_message}")


class NonDeterminismError(RunError):
    """Re-running the orchestrator issued a step that differs from its record."""

    def __init__(self, run_id: str, step_id: str, expected: str, got: str, where: str) -> None:
        self.step_id = step_id
        self.expected = expected
        self.got = got
        self.where = where
        super().__init__(
            run_id,
            f"run {run_id!r} step {step_id} at {where}: the log recorded {expected} but the "
            f"code now issues {got}. Workflow code must be deterministic; guard intended "
            "changes with `if ctx.patched('change-id'):`",
        )


class NondeterministicCallError(RunError):
    """Orchestrator code called something whose result differs between runs, outside ``ctx``.

    Raised in ``strict`` determinism mode (``RuntimeConfig(determinism=...)``,
    the mode of ``actorflow.testing`` and the replayer); ``warn`` mode logs a
    ``nondeterministic_call`` warning instead. A re-run after a crash would
    get another value and diverge from the log. ``call`` is what was called,
    ``site`` where (``file:line``), ``instead`` the ``ctx`` call to use.

    .. versionadded:: 0.5
    """

    def __init__(self, run_id: str, call: str, site: str, instead: str) -> None:
        self.call = call
        self.site = site
        self.instead = instead
        super().__init__(
            run_id,
            f"run {run_id!r}: orchestrator code called {call}() at {site}, which gives another "
            f"value when the run is replayed after a crash; use {instead} instead (recorded "
            "once, replayed after), or move the call into an agent",
        )


class UnawaitedStepError(RunError):
    """A step was issued but never awaited before its phase ended."""

    def __init__(self, run_id: str, step_ids: list[str]) -> None:
        self.step_ids = step_ids
        super().__init__(
            run_id, f"steps issued but never awaited: {', '.join(step_ids)}; await every ctx call"
        )


class RecoveryFailedError(RunError):
    """A run could not be recovered (too many attempts, timeout, or no usable data)."""

    def __init__(self, run_id: str, reason: str) -> None:
        self.reason = reason
        super().__init__(run_id, f"run {run_id!r} could not be recovered: {reason}")


class MissingResponseError(RunError, LookupError):
    """A test run paused for a prompt that the responses given to it do not answer.

    Raised by ``actorflow.testing``'s ``crash_and_recover`` and ``run_in_memory``.
    """

    def __init__(self, run_id: str, prompt: str) -> None:
        self.prompt = prompt
        super().__init__(
            run_id,
            f"run {run_id!r} paused for input {prompt!r} and no response answers it: "
            f"pass responses={{{prompt!r}: ...}} (or a function of the prompt)",
        )


class ForkEditError(RunError, ValueError):
    """An edit given to ``fork`` cannot be applied to the checkpoint; nothing was stored.

    .. versionadded:: 0.5
    """

    def __init__(self, run_id: str, checkpoint: str, agent: str, message: str) -> None:
        self.checkpoint = checkpoint
        self.agent = agent
        super().__init__(run_id, message)


class UnknownEditedAgentError(ForkEditError, LookupError):
    """A fork's edit names an agent the checkpoint does not hold.

    .. versionadded:: 0.5
    """

    def __init__(self, run_id: str, checkpoint: str, agent: str, known: tuple[str, ...]) -> None:
        self.known = known
        names = ", ".join(repr(n) for n in known) or "none"
        super().__init__(
            run_id,
            checkpoint,
            agent,
            f"cannot fork run {run_id!r} at {checkpoint!r} with an edit of agent {agent!r}: "
            f"the checkpoint holds no such agent (its agents: {names}); nothing was stored: "
            f"edit one of those (`actorflow show {run_id} {checkpoint}` shows them)",
        )


class InvalidStateEditError(ForkEditError):
    """A fork's new state for an agent does not fit the agent's state type.

    ``path`` is where in the state msgspec found the problem (``$.items[0]``;
    ``$`` for the whole value) and ``problem`` what it is.

    .. versionadded:: 0.5
    """

    def __init__(
        self,
        run_id: str,
        checkpoint: str,
        agent: str,
        state_type: str,
        path: str,
        problem: str,
    ) -> None:
        self.state_type = state_type
        self.path = path
        self.problem = problem
        super().__init__(
            run_id,
            checkpoint,
            agent,
            f"cannot fork run {run_id!r} at {checkpoint!r}: the new state of agent {agent!r} "
            f"does not fit {state_type} at {path}: {problem}; nothing was stored: give a "
            f"{state_type} (`actorflow show {run_id} {checkpoint}` shows the agent's state "
            "there)",
        )


class RunPaused(ActorflowError):
    """The run waits for input; resume it with ``runtime.resume(run_id, response)``.

    ``deadline`` (``time.time()``) is when its wait stops waiting, if it has a
    timeout: ``recover()`` then continues it with the wait's default.

    .. versionchanged:: 0.3
       ``deadline``.
    """

    def __init__(self, run_id: str, prompt: str, deadline: float | None = None) -> None:
        self.run_id = run_id
        self.prompt = prompt
        self.deadline = deadline
        super().__init__(f"run {run_id!r} paused for input: {prompt}")
