"""``crash_and_recover``: crash a run at a point of its log, recover it, compare."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypeAlias

import anyio
import msgspec

from actorflow.errors import MissingResponseError, RunPaused
from actorflow.runtime import Determinism, Runtime, RuntimeConfig
from actorflow.storage import MemoryStore
from actorflow.testing._store import CrashingStore

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    from actorflow.runtime import RunHandle
    from actorflow.storage import Store

__all__ = ["CrashOutcome", "crash_and_recover", "run_in_memory"]

_Responses: TypeAlias = "Mapping[str, str] | Callable[[str], str]"
"""What answers a paused run: prompt → response, or a function of the prompt."""


class CrashOutcome(msgspec.Struct, kw_only=True):
    """What ``crash_and_recover`` saw.

    Attributes:
        expected: the result of a run that never crashed.
        recovered: the result of the run that was to crash: after the crash
            and ``recover()`` if it crashed, else its own (it ended before
            the crash point). Either way it should equal ``expected``.
        crashed: whether the crash point was reached before the run ended;
            false once ``crash_after`` is past the end of the run's log.
        replayed: log records the first attempt after the crash replayed.
    """

    expected: Any
    recovered: Any
    crashed: bool
    replayed: int = 0


def _response(responses: _Responses | None, paused: RunPaused) -> str:
    """The answer to ``paused``'s prompt, or an error that says how to give one."""
    if callable(responses):
        return responses(paused.prompt)
    if responses is None or paused.prompt not in responses:
        raise MissingResponseError(paused.run_id, paused.prompt) from paused
    return responses[paused.prompt]


async def _answered(
    runtime: Runtime,
    paused: RunPaused,
    responses: _Responses | None,
    on_start: Callable[[RunHandle], object] | None = None,
) -> Any:
    """Resume the paused run with each prompt's response until it ends; its result."""
    while True:
        response = _response(responses, paused)
        try:
            return await runtime.resume(paused.run_id, response, on_start=on_start)
        except RunPaused as again:
            paused = again


async def _run(
    runtime: Runtime,
    workflow: type[Any],
    input: Any,
    run_id: str | None,
    responses: _Responses | None,
) -> Any:
    try:
        return await runtime.run(workflow, input, run_id=run_id)
    except RunPaused as paused:
        return await _answered(runtime, paused, responses)


async def run_in_memory(
    workflow: type[Any],
    input: Any,
    *,
    responses: Mapping[str, str] | Callable[[str], str] | None = None,
    config: RuntimeConfig | None = None,
    store: Store | None = None,
    run_id: str | None = None,
) -> Any:
    """Run ``workflow`` to the end on a ``MemoryStore`` (or ``store``) and return its result.

    Each time the run pauses (``ctx.wait_for_input``), it is resumed with
    ``responses``' answer to the prompt. Without ``config`` the determinism
    guard is ``strict``: orchestrator code that calls the clock or randomness
    outside ``ctx`` fails the run with ``NondeterministicCallError``.

    Raises:
        MissingResponseError: the run paused for a prompt ``responses`` does not answer.
        RunFailedError: the run failed; the cause is chained.
    """
    async with Runtime(store=store or MemoryStore(), config=_strict(config)) as runtime:
        return await _run(runtime, workflow, input, run_id, responses)


def _strict(config: RuntimeConfig | None) -> RuntimeConfig:
    """The caller's config, or the defaults with the determinism guard strict (tests' mode)."""
    return config if config is not None else RuntimeConfig(determinism=Determinism.STRICT)


async def _until_crash(
    crashing: CrashingStore,
    workflow: type[Any],
    input: Any,
    run_id: str,
    responses: _Responses | None,
    config: RuntimeConfig | None,
) -> tuple[bool, Any]:
    """Run on ``crashing``; (True, None) if it crashed, else (False, the run's result)."""
    result: Any = None
    error: Exception | None = None
    async with (
        Runtime(store=crashing, config=_strict(config)) as runtime,
        anyio.create_task_group() as tg,
    ):

        async def watch() -> None:
            await crashing.crashed.wait()
            tg.cancel_scope.cancel()

        tg.start_soon(watch)
        try:
            result = await _run(runtime, workflow, input, run_id, responses)
        except Exception as exc:  # raised outside the task group: never wrapped in a group
            error = exc
        tg.cancel_scope.cancel()
    if crashing.crashed.is_set():
        return True, None  # whatever the 'dead process' raised on its way down
    if error is not None:
        raise error
    return False, result


async def _recovered(
    runtime: Runtime,
    workflow: type[Any],
    input: Any,
    run_id: str,
    responses: _Responses | None,
) -> tuple[Any, int]:
    """Recover the crashed run, answering its prompts; its result and the records replayed."""
    handles: list[RunHandle] = []

    def replayed() -> int:
        return handles[0].replayed_steps if handles else 0

    results = await runtime.recover(run_id, on_start=handles.append)
    if run_id in results:
        return results[run_id], replayed()
    # not finished: it paused (again, or it was paused at the crash) or it failed;
    # its handle (or, if recover() did not drive it, the stored run) says which
    handle = handles[-1] if handles else await runtime.start(workflow, input, run_id=run_id)
    try:
        result = await handle.result()
    except RunPaused as paused:
        result = await _answered(runtime, paused, responses, on_start=handles.append)
    return result, replayed()


async def crash_and_recover(
    workflow: type[Any],
    input: Any,
    *,
    crash_after: int,
    responses: Mapping[str, str] | Callable[[str], str] | None = None,
    config: RuntimeConfig | None = None,
    store: Store | None = None,
    run_id: str = "crash-test",
) -> CrashOutcome:
    """Run once uninterrupted, then again crashing after ``crash_after`` records, recover, compare.

    ``responses`` answers the prompts of a run that pauses
    (``ctx.wait_for_input``): a mapping from prompt to response, or a function
    of the prompt. Both runs are resumed with them each time they pause,
    before and after the crash; a crash may land while a response is being
    recorded, so a run can ask the same prompt again after it.

    The caller compares ``outcome.recovered`` with ``outcome.expected`` (they
    differ only if the workflow is not deterministic or its agents' results
    depend on more than their inputs and states). Past the end of the run's
    log nothing crashes: ``outcome.crashed`` is false and ``recovered`` is the
    result of that run, so a loop over crash points can stop there. Without
    ``config`` the determinism guard is ``strict``, as in :func:`run_in_memory`.

    Raises:
        MissingResponseError: a run paused for a prompt ``responses`` does not answer.
        RunFailedError: a run failed (before or after the crash); the cause is chained.
    """
    expected = await run_in_memory(
        workflow, input, responses=responses, config=config, run_id=run_id
    )
    inner = store if store is not None else MemoryStore()
    crashing = CrashingStore(inner, crash_after=crash_after)
    crashed, result = await _until_crash(crashing, workflow, input, run_id, responses, config)
    if not crashed:
        return CrashOutcome(expected=expected, recovered=result, crashed=False)
    async with Runtime(store=inner, config=_strict(config)) as runtime:
        recovered, replayed = await _recovered(runtime, workflow, input, run_id, responses)
    return CrashOutcome(expected=expected, recovered=recovered, crashed=True, replayed=replayed)
