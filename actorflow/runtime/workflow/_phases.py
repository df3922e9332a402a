"""Phases: named, memoised units of a run, each with its own namespace of step ids.

A phase call gets its id when it is made; a phase that finished before a crash
returns its recorded result without running. Inside, steps count in the
phase's namespace (``<parent>/<name>.<n>``, a retry ``...@<attempt>``), so
concurrent phases and a phase called again in a loop never share ids. Its end
is a ``PhaseEndRecord`` holding its result, and a snapshot.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypeVar

from actorflow.runtime.workflow._ids import Namespace, enter_namespace, leave_namespace
from actorflow.runtime.workflow._triggers import Trigger
from actorflow.runtime.workflow.steps import close_namespace
from actorflow.storage import EventRecord, PhaseEndRecord
from actorflow.storage import decode_value as decode
from actorflow.storage import encode_value as encode

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from actorflow.runtime.workflow._env import StepEnv

__all__ = ["RetryPhase", "run_phase"]

T = TypeVar("T")


class RetryPhase(BaseException):
    """Raised by ``ctx.retry_phase()``; the enclosing phase catches it and starts over."""


async def run_phase(
    env: StepEnv,
    phase_id: str,
    name: str,
    fn: Callable[..., Awaitable[T]],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    result_type: Any,
) -> T:
    """Run phase ``phase_id`` (memoised): its recorded result, or ``fn`` run to its end."""
    done = env.view.phases.get(phase_id)
    trace = env.trace
    if done is not None:
        if trace is not None:
            trace.phase(name, phase_id, replayed=True)
        recorded: T = decode(done.result, result_type, f"result of phase {phase_id}")
        return recorded
    if trace is None:
        return await _run_phase(env, phase_id, name, fn, args, kwargs)
    span, token = trace.phase(name, phase_id, replayed=False)
    error: BaseException | None = None
    try:
        return await _run_phase(env, phase_id, name, fn, args, kwargs)
    except BaseException as exc:
        error = exc
        raise
    finally:
        trace.end_phase(span, token, error)


async def _run_phase(
    env: StepEnv,
    phase_id: str,
    name: str,
    fn: Callable[..., Awaitable[T]],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
) -> T:
    rec = env.recorder
    attempt = 0
    while True:
        ns = Namespace(phase_id if attempt == 0 else f"{phase_id}@{attempt}")
        token = enter_namespace(ns)
        rec.view.phase = name
        rec.emit("phase_started", phase=name, phase_id=phase_id, attempt=attempt)
        if ns.peek_step() not in env.view.steps and rec.view.position:
            # A phase re-entered by a recovery already had its start
            # snapshot; taking one now would only slow the replay down.
            # At position 0 the log is empty: a snapshot would hold nothing a
            # replay from the start does not make, and retention deletes it.
            rec.snapshot(Trigger.PHASE_START)
        try:
            result = await fn(*args, **kwargs)
        except RetryPhase:
            attempt += 1
            rec.record(EventRecord(kind="phase_retry", step_id=ns.path))
            continue
        finally:
            leave_namespace(token)
        await close_namespace(env, ns)
        break
    rec.record(
        PhaseEndRecord(
            phase_id=phase_id, name=name, result=encode(result, f"result of phase {name}")
        )
    )
    await rec.after_phase()
    rec.emit("phase_ended", phase=name, phase_id=phase_id)
    rec.snapshot(Trigger.PHASE_END)
    return result
