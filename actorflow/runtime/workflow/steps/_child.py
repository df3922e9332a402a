"""A parent's steps about its child runs: ``ctx.start_child`` and ``ChildRun.result()``.

Starting a child is a step of the parent (``StartChildStep``, kind
``child``) whose record names the child's run id; a replay re-attaches to
the child. The child's end is the one durable wait (``ChildResultStep``) on
its end signal. How children are created, driven and re-attached, and how
their ends are posted, is the runtime's side: ``_children.py``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Generic, TypeVar, cast

from actorflow.errors import ConfigurationError, RunInputMismatchError, StepFailedError
from actorflow.runtime.actors import class_name
from actorflow.runtime.workflow._children import ChildEnd, child_run_id, child_signal
from actorflow.runtime.workflow._ids import args_hash
from actorflow.runtime.workflow._inbox import InboxKind
from actorflow.runtime.workflow._outcomes import run_signature
from actorflow.runtime.workflow._tracing import child_started
from actorflow.runtime.workflow.steps._base import Step
from actorflow.runtime.workflow.steps._wait import NO_DEFAULT, WaitStep
from actorflow.storage import ErrorInfo, RunStatus, validate_run_id
from actorflow.storage import decode_value as decode
from actorflow.storage import encode_value as encode

if TYPE_CHECKING:
    from collections.abc import Callable

    from actorflow.runtime.workflow._children import OnParentCancel
    from actorflow.runtime.workflow._env import ChildRuns, StepEnv
    from actorflow.runtime.workflow._ids import Namespace
    from actorflow.runtime.workflow._wait_records import WaitResolution

__all__ = ["ChildResultStep", "ChildRun", "StartChildStep"]

T = TypeVar("T")


def _children(env: StepEnv) -> ChildRuns:
    children = env.children
    if children is None:
        raise ConfigurationError("children", None, "a runtime that starts child runs")
    return children


class ChildRun(Generic[T]):
    """A child run that ``ctx.start_child`` started. Users receive it; they never build it.

    Attributes:
        run_id: the child's run id.
        workflow: the child's orchestrator class.

    .. versionadded:: 0.3
    """

    __slots__ = ("_asked", "_env", "_ns", "run_id", "workflow")

    def __init__(
        self, env: StepEnv, ns: Callable[[], Namespace], run_id: str, workflow: type[object]
    ) -> None:
        self._env = env
        self._ns = ns
        self._asked = False
        self.run_id = run_id
        self.workflow = workflow

    def result(self) -> Step[T]:
        """A step that waits for the child to end and returns its result.

        Durable: the child's end is a signal in the parent's inbox, taken
        once and recorded, so a replay returns the same result (or raises
        the same error) without looking at the child again. The result is
        decoded to the return type of the child's ``run``. Ask once per
        child (await the step, or pass it to ``ctx.gather``).

        Raises:
            StepFailedError: (when awaited) the child failed or was cancelled;
                the message names the child run and its error.
            ConfigurationError: ``result()`` of this child was asked for before.
        """
        if self._asked:
            raise ConfigurationError(
                "result()", self.run_id, "one result() per child run: await that step once"
            )
        self._asked = True
        result_type = run_signature(self.workflow)[1]
        return cast("Step[T]", ChildResultStep(self._env, self._ns(), self.run_id, result_type))

    def __repr__(self) -> str:
        return f"<ChildRun {class_name(self.workflow)} {self.run_id!r}>"


class StartChildStep(Step[ChildRun[T]]):
    """``ctx.start_child``: create the child run and drive it; replays re-attach to it.

    Records a ``StepRecord`` of kind ``child`` whose result is the child's
    run id (a fork of the parent replays it and finds the same child).
    """

    kind = "child"
    inline = False  # a replay re-attaches to the child (store I/O)

    def __init__(
        self,
        env: StepEnv,
        ns: Namespace,
        ns_now: Callable[[], Namespace],
        workflow: type[object],
        input: object,
        *,
        run_id: str | None,
        on_parent_cancel: OnParentCancel,
    ) -> None:
        if on_parent_cancel not in ("cancel", "abandon"):
            raise ConfigurationError("on_parent_cancel", on_parent_cancel, "'cancel' or 'abandon'")
        given = validate_run_id(run_id) if run_id is not None else None
        name = class_name(workflow)
        data = encode(input, "input of child run", name)
        self._workflow = workflow
        self._input = input
        self._ns_now = ns_now
        self._cancel_with_parent = on_parent_cancel == "cancel"
        payload = name.encode() + b"\0" + data + b"\0" + (given or "").encode()
        super().__init__(env, ns, None, args_hash(self.kind, None, payload))
        self.child_id = given if given is not None else child_run_id(env.run_id, self.id)

    def _handle(self, child_id: str) -> ChildRun[T]:
        return ChildRun(self.env, self._ns_now, child_id, self._workflow)

    def replay(self) -> ChildRun[T]:
        record = self.record
        assert record is not None
        if record.error is not None:
            raise self.failure(record.error)
        child_id: str = decode(record.result or b"\xc0", str, "child of step", self.id)
        return self._handle(child_id)

    async def finish(self) -> ChildRun[T]:
        if not self.recorded:
            return await self._live()
        child = self.replay()
        if self._cancel_with_parent:
            _children(self.env).adopt(self.env.run_id, child.run_id)
        # an orphaned child goes on now, beside the parent, not only once it is waited for
        await _children(self.env).reattach(child.run_id, self.env.run_id, post=False)
        return child

    async def _live(self) -> ChildRun[T]:
        env = self.env
        children = _children(env)
        rec = env.recorder
        if rec.barrier_needed():  # the child's input may depend on what is not durable yet
            await rec.output_barrier()
        child_id = self.child_id
        if self._cancel_with_parent:
            children.adopt(env.run_id, child_id)
        child_started(self.span, child_id)  # its run span links to this step's (tracing on)
        try:
            await children.start(
                self._workflow,
                self._input,
                child_id=child_id,
                parent_run=env.run_id,
                parent_step=self.id,
            )
        except RunInputMismatchError as exc:
            error = ErrorInfo.of(exc)
            self._record_outcome(error=error)
            await rec.after_step()
            raise self.failure(error) from exc
        self._record_outcome(result=encode(child_id, "child run id"))
        await rec.after_step()
        return self._handle(child_id)


class ChildResultStep(WaitStep[Any]):
    """``ChildRun.result()``: a wait for the child's end signal, decoded to the child's result."""

    def __init__(self, env: StepEnv, ns: Namespace, child_id: str, result_type: Any) -> None:
        self._child_id = child_id
        self._result_type = result_type
        super().__init__(
            env,
            ns,
            "wait",
            ChildEnd,
            child_signal(child_id),
            timeout=None,
            default=NO_DEFAULT,
            prompt=None,
            pause=False,
            source=InboxKind.CHILD_END,
        )

    def _outcome(self, resolution: WaitResolution) -> Any:
        end: ChildEnd = decode(resolution.payload or b"\xc0", ChildEnd, "end of child", self.id)
        if end.status is RunStatus.COMPLETED:
            return decode(
                end.result or b"\xc0", self._result_type, "result of child run", end.child
            )
        error = end.error or ErrorInfo(type=str(end.status), message=f"the run was {end.status}")
        raise StepFailedError(
            self.env.run_id,
            self.id,
            error.type,
            f"child run {end.child!r} {end.status}: {error.message}",
        )

    async def _live(self) -> Any:
        # a child that ended while no one was there to post it (or orphaned) is seen to now
        await _children(self.env).reattach(self._child_id, self.env.run_id, post=True)
        return await super()._live()
