"""The seam to a cluster engine (``actorflow.ray``): where runs and placed agents go.

A runtime built with ``cluster=`` asks it two things, and nothing else of it:
whether a run it starts is driven elsewhere (then the runtime stores the run,
hands its id to the cluster and follows it through the store), and whether an
agent class is placed elsewhere (then the run's agent is a reference the
cluster gives, which the engine drives like any :class:`AgentRef`). What a
step records does not depend on where its agent ran.

:class:`RemoteStep` carries a step's identity, idempotency key and last
milestone to an agent in another process, its new milestones to the run's
owner to record, and its metrics back.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import anyio
import msgspec

from actorflow._log import get_logger
from actorflow._text import describe
from actorflow.errors import StorageError
from actorflow.runtime.workflow._handle import RunEvent
from actorflow.runtime.workflow._outcomes import decode_result, finished_error
from actorflow.runtime.workflow._progress import StepInfo, StepMeta
from actorflow.runtime.workflow._tracing import carried, remote_handler
from actorflow.storage import RunIndex, RunStatus

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from actorflow.runtime.actors import Actor, ActorRef
    from actorflow.runtime.flow import Limit
    from actorflow.runtime.workflow._config import RuntimeConfig
    from actorflow.runtime.workflow._handle import RunTracker
    from actorflow.storage import RunManifest, SharedLimits, Store

__all__ = [
    "AgentPlacer",
    "Cluster",
    "ClusterRuntime",
    "LimitsCluster",
    "RemoteStep",
    "RunFollower",
]

_log = get_logger("actorflow.cluster")

_STOPPED = (RunStatus.PAUSED, RunStatus.BLOCKED)


class AgentPlacer(Protocol):
    """Starts a run's agents of one class in another process (see :class:`Cluster`).

    .. versionadded:: 0.4
    """

    async def spawn(
        self, cls: type[Actor], *, run_id: str, name: str, state: bytes
    ) -> ActorRef[Any]:
        """Start (or replace) agent ``name`` of run ``run_id`` with ``state`` (msgpack bytes).

        The reference it returns is driven like a local agent's: its
        ``deliver`` replies carry the agent's state after each message.
        """
        ...

    async def release(self, run_id: str) -> None:
        """The run's attempt ended here: stop its agents (best effort, never raises)."""
        ...


class ClusterRuntime(Protocol):
    """What a cluster learns of the runtime it serves (a ``Runtime``).

    .. versionadded:: 0.4
    """

    @property
    def store(self) -> Store:
        """The runtime's store."""
        ...

    @property
    def config(self) -> RuntimeConfig:
        """The runtime's workflow options (its hosts run with the same)."""
        ...

    @property
    def owner(self) -> str:
        """The runtime's owner id (``host:pid:random``), naming it in what it starts."""
        ...

    @property
    def limits(self) -> tuple[Limit, ...]:
        """The runtime's declared limits (its hosts declare the same).

        .. versionadded:: 0.6
        """
        ...


class Cluster(Protocol):
    """Where a runtime's runs and placed agents go: ``Runtime(cluster=...)``.

    Implemented by :class:`actorflow.ray.RayCluster`. The runtime calls
    ``open`` as it starts and ``aclose`` as it stops (after its own runs).

    .. versionadded:: 0.4
    """

    @property
    def drives_runs(self) -> bool:
        """Whether runs this runtime starts are driven elsewhere (by :meth:`dispatch`)."""
        ...

    async def open(self, runtime: ClusterRuntime) -> None:
        """Connect, with the runtime's store and configuration at hand."""
        ...

    async def aclose(self) -> None:
        """Let go of the cluster (runs driven elsewhere go on)."""
        ...

    async def dispatch(self, run_id: str) -> None:
        """Have a run that is stored (queued, or orphaned) driven somewhere in the cluster."""
        ...

    def placer_for(self, cls: type[Actor]) -> AgentPlacer | None:
        """Where agents of ``cls`` run: a placer, or ``None`` for this process."""
        ...


@runtime_checkable
class LimitsCluster(Protocol):
    """A cluster whose processes share ``Limit`` budgets of its own (``actorflow.ray``'s hosts).

    A runtime whose cluster offers it keeps its limits' windows and slots
    there rather than in its store's ``SharedLimits``.

    .. versionadded:: 0.6
    """

    def shared_limits(self) -> SharedLimits:
        """Where this process's limiters take their budgets."""
        ...


# --- steps whose agent lives in another process ----------------------------------------


class _Carried(msgspec.Struct, frozen=True, kw_only=True):
    info: StepInfo
    progress: bytes | None = None
    trace: str | None = None  # the step span's W3C traceparent, when tracing is on


class _Report(msgspec.Struct, frozen=True, kw_only=True):
    metrics: dict[str, float] = {}
    milestones: list[bytes] = []


_carried_decoder = msgspec.msgpack.Decoder(_Carried)
_report_decoder = msgspec.msgpack.Decoder(_Report)
_encoder = msgspec.msgpack.Encoder()


class RemoteStep:
    """A step served in another process: what its handler sees there, and what comes back.

    The sending side packs the step (:meth:`pack`), the serving side unpacks
    it into the meta its handler runs with (:meth:`unpack`, then
    ``ActorRef.deliver(msg, step.meta)``), and sends :meth:`report` back with
    the reply; the sending side applies it with :meth:`settle`.

    Milestones (``save_progress``): when the serving side can reach the run's
    owner, it unpacks with ``save``, which has the owner record each one
    (:meth:`record` there) before ``save_progress`` returns: durable, as in
    process. Without ``save`` they only travel back with the reply: a retry
    of the step in the same attempt starts from the last one, a re-run after
    a crash from the one recorded before.

    .. versionadded:: 0.4
    """

    __slots__ = ("_save", "meta", "milestones")

    def __init__(
        self,
        info: StepInfo,
        progress: bytes | None,
        save: Callable[[bytes], Awaitable[None]] | None = None,
    ) -> None:
        self.milestones: list[bytes] = []
        self._save = save
        self.meta: object = StepMeta(info, self._keep, progress)
        """What to deliver the message with: the handler's ``current_step()`` reads it."""

    async def _keep(self, data: bytes) -> None:
        if self._save is not None:
            await self._save(data)
        self.milestones.append(data)
        assert isinstance(self.meta, StepMeta)
        self.meta.progress = data

    @staticmethod
    def pack(meta: object | None) -> bytes | None:
        """The step a message is delivered for (its engine meta), as bytes; ``None`` if none."""
        if not isinstance(meta, StepMeta):
            return None
        trace = carried(meta)
        return _encoder.encode(_Carried(info=meta.info, progress=meta.progress, trace=trace))

    @classmethod
    def unpack(
        cls, data: bytes | None, save: Callable[[bytes], Awaitable[None]] | None = None
    ) -> RemoteStep | None:
        """The serving side of a packed step (``None`` for a message sent outside a step).

        ``save`` has the run's owner record a milestone (see the class docstring).
        """
        if data is None:
            return None
        carried = _carried_decoder.decode(data)
        step = cls(carried.info, carried.progress, save)
        if carried.trace is not None:  # the handler's span joins the step's trace
            assert isinstance(step.meta, StepMeta)
            remote_handler(carried.trace, step.meta)
        return step

    def report(self) -> bytes:
        """What the handler reported (metrics, milestones), to send back with the reply."""
        assert isinstance(self.meta, StepMeta)
        return _encoder.encode(_Report(metrics=self.meta.metrics, milestones=self.milestones))

    @staticmethod
    def is_step(meta: object | None) -> bool:
        """Whether ``meta`` is a workflow step's (its milestones can be recorded)."""
        return isinstance(meta, StepMeta)

    @staticmethod
    async def record(meta: object, data: bytes) -> None:
        """The owner's side of ``save``: record a milestone of the step ``meta`` is for, durably.

        Raises:
            TypeError: ``meta`` is not a step's (see :meth:`is_step`).
        """
        if not isinstance(meta, StepMeta):
            raise TypeError(f"not a step's meta: {type(meta).__name__}")
        await meta.milestone(data)

    @staticmethod
    def settle(meta: object | None, report: bytes | None) -> None:
        """Apply a remote handler's report to the step's meta: its metrics and last milestone.

        The milestone becomes the step's progress for a retry in this
        attempt (recorded already if the serving side had ``save``).
        """
        if not isinstance(meta, StepMeta) or not report:
            return
        got = _report_decoder.decode(report)
        for name, value in got.metrics.items():
            meta.metrics[name] = meta.metrics.get(name, 0.0) + value
        if got.milestones:
            meta.progress = got.milestones[-1]


# --- runs driven elsewhere, followed through the store ----------------------------------


class FollowingRuns(Protocol):
    """What the follower asks of the runtime's runs (``Runs``, in ``_runs.py``)."""

    @property
    def store(self) -> Store:
        """The store the followed runs live in."""
        ...

    async def cancel_stored(self, run_id: str, reason: str | None) -> None:
        """Cancel a run through the store (a request in its inbox, or its manifest)."""
        ...


class RunFollower:
    """Follows runs other processes drive, and finishes their handles as they end.

    One loop for every followed run: each poll reads the store's index of
    unfinished runs once; a followed run gone from it has finished and its
    manifest is read. Every ``manifest_every`` polls the manifests of all
    followed runs are read too, to see pauses and blocks (still unfinished).
    A handle's ``cancel`` posts a cancel request through ``runs.cancel_stored``.
    """

    def __init__(
        self,
        runs: FollowingRuns,
        *,
        poll_interval: float = 0.25,
        manifest_every: int = 8,
    ) -> None:
        self._store = runs.store
        self._runs = runs
        self.poll_interval = poll_interval
        self._manifest_every = manifest_every
        self._followed: dict[str, tuple[RunTracker, type[Any] | None]] = {}
        self._cancel_sent: set[str] = set()
        self._wake = anyio.Event()

    def __contains__(self, run_id: object) -> bool:
        return run_id in self._followed

    def follow(self, tracker: RunTracker, workflow: type[Any] | None) -> None:
        """Finish ``tracker`` when its run ends, wherever it runs."""
        self._followed[tracker.run_id] = (tracker, workflow)
        self._wake.set()

    async def run(self) -> None:
        """Poll until cancelled (the runtime's task group owns this)."""
        polls = 0
        while True:
            if self._followed:
                polls += 1
                try:
                    await self._poll(every=polls % self._manifest_every == 0)
                except StorageError as exc:
                    # an unreachable store is waited out: the runs go on without us
                    _log.warning("run_follow_failed", error=describe(exc))
                with anyio.move_on_after(self.poll_interval):
                    await self._wake.wait()
            else:
                await self._wake.wait()
            self._wake = anyio.Event()

    async def _poll(self, *, every: bool) -> None:
        store = self._store
        for run_id, (tracker, _) in list(self._followed.items()):
            if tracker.cancel_requested and run_id not in self._cancel_sent:
                self._cancel_sent.add(run_id)
                await self._runs.cancel_stored(run_id, tracker.cancel_reason)
        ids = list(self._followed)
        if isinstance(store, RunIndex) and not every:
            unfinished = set(await store.list_unfinished())
            ids = [run_id for run_id in ids if run_id not in unfinished]
        limiter = anyio.CapacityLimiter(16)
        async with anyio.create_task_group() as tg:
            for run_id in ids:
                tg.start_soon(self._check, run_id, limiter)

    async def _check(self, run_id: str, limiter: anyio.CapacityLimiter) -> None:
        async with limiter:
            manifest = await self._store.read_run(run_id)
        followed = self._followed.get(run_id)
        if followed is None:
            return
        tracker, workflow = followed
        if manifest.status is not tracker.status and manifest.status is not RunStatus.QUEUED:
            tracker.status = manifest.status
            tracker.stream.lifecycle(
                RunEvent(
                    event="run_status", run_id=run_id, time=time.time(), status=str(manifest.status)
                )
            )
        if manifest.status.finished or manifest.status in _STOPPED:
            del self._followed[run_id]
            self._cancel_sent.discard(run_id)
            _finish(tracker, manifest, workflow)


def _finish(tracker: RunTracker, manifest: RunManifest, workflow: type[Any] | None) -> None:
    if manifest.status is RunStatus.COMPLETED:
        try:
            result = decode_result(manifest, workflow)
        except Exception as exc:  # a result this code cannot decode: the handle says so
            tracker.finish(manifest.status, error=exc)
            return
        tracker.finish(manifest.status, result=result)
    else:
        tracker.finish(manifest.status, error=finished_error(manifest))
