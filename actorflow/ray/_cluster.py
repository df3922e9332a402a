"""``RayCluster``: the driver's side of running actorflow on a Ray cluster."""

from __future__ import annotations

import os
import socket
import uuid
from typing import TYPE_CHECKING, Any

import anyio
import msgspec
import ray
import ray.util
from ray.exceptions import RayError

from actorflow._log import get_logger
from actorflow._text import describe
from actorflow.errors import (
    ClassNotShippedError,
    ClusterUnreachableError,
    ConfigurationError,
    HostsOutdatedError,
    HostStartError,
)
from actorflow.ray._bridge import wait_ref
from actorflow.ray._handles import as_host
from actorflow.ray._host import Host
from actorflow.ray._limits import BUDGET_PREFIX
from actorflow.ray._placement import Placement, placement_of
from actorflow.ray._placer import RayPlacer
from actorflow.ray._spec import HostInfo, HostSpec, encode, spec_differences
from actorflow.runtime import AdoptionPolicy

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from ray.actor import ActorHandle

    from actorflow.runtime.actors import Actor
    from actorflow.runtime.cluster import AgentPlacer, ClusterRuntime

__all__ = ["RayCluster"]

_log = get_logger("actorflow.ray")

_HOST_ADOPTION = AdoptionPolicy(poll_interval=1.0, recheck_interval=10.0)


class RayCluster:
    """Runs a runtime's workflow runs on a Ray cluster: ``Runtime(cluster=RayCluster())``.

    Opening the runtime connects to Ray and makes sure ``hosts`` hosts are
    up: detached, named Ray actors (``actorflow-host-0``, ...) that each run a
    full actorflow runtime on the shared store, adopting orphaned runs. They
    outlive the driver; a later driver with the same ``namespace`` reuses
    them. ``runtime.start`` stores the run queued and hands it to the least
    loaded host; its handle follows the run through the store, so
    ``result``, ``wait`` and ``cancel`` survive the host's death, and
    ``runtime.follow(run_id)`` attaches a new driver to a running run.
    Agents whose class has a :class:`Placement` run on Ray actors of their own.

    Args:
        address: the cluster (``"auto"``: the one this node belongs to;
            ``"host:port"``: its head node). Ignored if Ray is initialised already.
        hosts: how many hosts to run.
        namespace: the Ray namespace of the hosts and placed agents.
        runtime_env: Ray's runtime environment for hosts and placed agents:
            how your code reaches the workers (``working_dir``, ``py_modules``).
        imports: modules every host and placed-agent actor imports as it
            starts, so that your workflow and agent classes are registered.
        store: the store's location as every node sees it (``s3://bucket/prefix``,
            ``postgresql://…?schema=…``, or a folder or SQLite file on a path all
            nodes share: one machine only); default: the runtime's, when it was
            given as a location, is a file store, or is an SQLite or PostgreSQL
            store (its ``url``, password included: hosts log in as the driver).
        store_options: keyword arguments for ``open_store`` on the hosts
            (an S3 ``endpoint_url``, credentials...).
        host_placement: the resources each host reserves (default one CPU).
        adoption: the hosts' :class:`~actorflow.AdoptionPolicy`.
        connect_timeout: seconds to reach the cluster and start the hosts.
        replace_hosts: if the namespace's running hosts were started with
            another setup (an earlier deploy's config, imports or code), stop
            them and start new ones; their runs are interrupted and taken
            over by the new hosts. Default: refuse (:class:`HostsOutdatedError`).
        node_watch_interval: seconds between a host's looks at Ray's node
            table (a dead node wakes its adopter at once).

    .. versionadded:: 0.4
    """

    drives_runs = True

    def __init__(
        self,
        address: str = "auto",
        *,
        hosts: int = 2,
        namespace: str = "actorflow",
        runtime_env: Mapping[str, Any] | None = None,
        imports: Sequence[str] = (),
        store: str | os.PathLike[str] | None = None,
        store_options: Mapping[str, Any] | None = None,
        host_placement: Placement | None = None,
        adoption: AdoptionPolicy = _HOST_ADOPTION,
        connect_timeout: float = 60.0,
        node_watch_interval: float = 1.0,
        replace_hosts: bool = False,
    ) -> None:
        if hosts < 1:
            raise ConfigurationError("hosts", hosts, "an int of 1 or more")
        self.address = address
        self.hosts = hosts
        self.namespace = namespace
        self.runtime_env = dict(runtime_env) if runtime_env is not None else None
        self.imports = tuple(imports)
        self._store = os.fspath(store) if store is not None else None
        self.store_options = dict(store_options or {})
        self.host_placement = (
            host_placement if host_placement is not None else Placement(num_cpus=1)
        )
        self.adoption = adoption
        self.connect_timeout = connect_timeout
        self.node_watch_interval = node_watch_interval
        self.replace_hosts = replace_hosts
        self._handles: list[ActorHandle[Any]] = []
        self._loads: list[int] = []
        self._infos: list[HostInfo] = []
        self._placer: RayPlacer | None = None
        self._initialised_ray = False

    # --- the runtime's side ------------------------------------------------------------

    async def open(self, runtime: ClusterRuntime) -> None:
        """Connect to Ray and start (or find) the hosts; wait until each runs.

        A host of the namespace that is already running is reused if it was
        started with this driver's setup (store, options, config, imports,
        ``runtime_env``, resources); one that runs with another is refused
        (:class:`HostsOutdatedError`), or replaced with ``replace_hosts``. A
        host that an earlier driver started and that could not open its
        runtime holds no run: it is replaced.

        Raises:
            ClusterUnreachableError: the address does not answer.
            HostStartError: a host could not start its runtime (the store is
                unreachable from it, say).
            ClassNotShippedError: a host cannot import a module of ``imports``.
            HostsOutdatedError: running hosts have another setup, and not ``replace_hosts``.
        """
        location = self._location(runtime)
        await self._connect()
        try:
            await self._open_hosts(runtime, location)
        except BaseException:
            with anyio.CancelScope(shield=True):
                await self.aclose()
            raise

    async def _open_hosts(self, runtime: ClusterRuntime, location: str) -> None:
        spec = HostSpec(
            name="",
            namespace=self.namespace,
            store=location,
            started_by=f"{runtime.owner}/{uuid.uuid4().hex[:8]}",
            store_options=self.store_options,
            config=encode(runtime.config),
            adoption=self.adoption,
            imports=self.imports,
            node_watch_interval=self.node_watch_interval,
            runtime_env=self.runtime_env,
            resources=self.host_placement.ray_options(),
            limits=runtime.limits,
        )
        self._placer = RayPlacer(
            namespace=self.namespace,
            imports=self.imports,
            runtime_env=self.runtime_env,
            start_timeout=self.connect_timeout,
        )
        handles = await anyio.to_thread.run_sync(self._start_hosts, spec, range(self.hosts))
        infos = await self._wait_started(handles)
        outdated: dict[int, list[str]] = {}
        stale_failures: list[int] = []
        for index, info in enumerate(infos):
            theirs = _started_by(info.spec)
            if theirs == spec.started_by:
                continue  # started just now, for this driver
            if info.error is not None:
                stale_failures.append(index)  # it holds no run: replacing it costs nothing
            elif differences := spec_differences(spec, info.spec):
                outdated[index] = differences
        if outdated and not self.replace_hosts:
            raise HostsOutdatedError(
                self.namespace,
                [infos[i].name for i in sorted(outdated)],
                sorted({d for found in outdated.values() for d in found}),
            )
        replace = sorted([*stale_failures, *outdated])
        if replace:
            _log.info("hosts_replaced", namespace=self.namespace, hosts=replace)
            await self._stop([handles[i] for i in replace], [infos[i].name for i in replace])
            if outdated:  # the placed agents' actors run the outdated code too
                await self._stop_placed()
            new = await anyio.to_thread.run_sync(self._start_hosts, spec, replace)
            for index, handle, info in zip(
                replace, new, await self._wait_started(new), strict=True
            ):
                handles[index], infos[index] = handle, info
        for info in infos:
            if info.error is not None:
                if "ClassNotShippedError" in info.error:
                    raise ClassNotShippedError(
                        "a module of RayCluster(imports=...)", f"host {info.name!r}", info.error
                    )
                if "ConfigurationError" in info.error:
                    raise HostStartError(
                        info.name,
                        info.error,
                        "every node must run the driver's actorflow version and accept its "
                        "RuntimeConfig",
                    )
                raise HostStartError(info.name, info.error)
        self._handles, self._infos = handles, infos
        self._loads = [0] * len(handles)

    async def _wait_started(self, handles: list[ActorHandle[Any]]) -> list[HostInfo]:
        """Each host's ``HostInfo`` once it has started (or failed to).

        Raises:
            HostStartError: not all within ``connect_timeout``.
        """
        with anyio.move_on_after(self.connect_timeout) as waited:
            infos = []
            for h in handles:
                info: bytes = await wait_ref(as_host(h).info.remote())
                infos.append(msgspec.msgpack.decode(info, type=HostInfo))
            return infos
        assert waited.cancelled_caught
        raise HostStartError(
            "actorflow-host-*",
            f"not up within {self.connect_timeout}s (does the cluster have "
            f"{self.host_placement.ray_options()} free for {self.hosts} hosts?)",
        )

    async def aclose(self) -> None:
        """Let go of the cluster; the hosts and their runs go on (see :meth:`stop_hosts`)."""
        if self._initialised_ray:
            self._initialised_ray = False
            await anyio.to_thread.run_sync(ray.shutdown)

    async def dispatch(self, run_id: str) -> None:
        """Hand a stored run to the least loaded host.

        A host that does not answer is skipped, and the others are told to
        look for orphans now. If none answers, the run stays queued for the
        hosts' adopters.

        Raises:
            ClassNotShippedError: the host cannot import the run's workflow
                class; the run stays queued for a host that can.
        """
        order = sorted(range(len(self._handles)), key=lambda i: self._loads[i])
        for index in order:
            # counted before the call: starts made meanwhile choose among the others
            self._loads[index] += 1
            try:
                load, error = await wait_ref(as_host(self._handles[index]).drive.remote(run_id))
            except RayError as exc:
                _log.warning("host_unreachable", host=index, error=describe(exc))
                self._loads[index] = 1 << 30  # try the others first from now on
                await self.adopt_now()
                continue
            self._loads[index] = load
            if error is not None:
                if error.startswith("class:"):
                    _, workflow, detail = error.split(":", 2)
                    raise ClassNotShippedError(workflow, f"host {index}", detail)
                _log.warning("host_refused_run", host=index, run_id=run_id, error=error)
                continue
            return

    def placer_for(self, cls: type[Actor]) -> AgentPlacer | None:
        """The Ray placer for classes with a ``placement`` (``None`` for the rest)."""
        if placement_of(cls) is None:
            return None
        return self.placer

    # --- for operators ----------------------------------------------------------------------

    @property
    def placer(self) -> RayPlacer:
        """What starts placed agents on the cluster (after ``open``).

        Raises:
            RuntimeError: the cluster is not open.
        """
        if self._placer is None:
            raise RuntimeError("the RayCluster is not open: use it in `async with Runtime(...)`")
        return self._placer

    @property
    def host_info(self) -> list[HostInfo]:
        """What each host said of itself when this driver connected."""
        return list(self._infos)

    async def adopt_now(self) -> None:
        """Tell every host to look for orphaned runs now (never bypasses a claim)."""
        for handle in self._handles:
            try:
                await wait_ref(as_host(handle).adopt_now.remote())
            except RayError:
                pass  # a dead host has nothing to adopt

    async def loads(self) -> list[int]:
        """How many runs each host drives now (``-1``: it does not answer)."""
        out = []
        for handle in self._handles:
            try:
                out.append(await wait_ref(as_host(handle).load.remote()))
            except RayError:
                out.append(-1)
        return out

    async def host_memory(self) -> list[int]:
        """Each host process's resident memory, in bytes (``-1``: it does not answer)."""
        out = []
        for handle in self._handles:
            try:
                out.append(await wait_ref(as_host(handle).memory.remote()))
            except RayError:
                out.append(-1)
        return out

    async def stop_hosts(self) -> None:
        """Stop the namespace's hosts, placed-agent actors and limit budgets, from any driver.

        Each host stops its runtime first: its runs are marked interrupted,
        for a later host to take on. The actors are gone then (not
        restarted); a later ``open`` starts new hosts, and the limits' budgets
        start afresh.
        """
        hosts = await anyio.to_thread.run_sync(self._named_actors, "actorflow-host-")
        await self._stop([handle for handle, _ in hosts], [name for _, name in hosts])
        await self._stop_placed()
        budgets = await anyio.to_thread.run_sync(self._named_actors, BUDGET_PREFIX)
        await self._stop([h for h, _ in budgets], [n for _, n in budgets], hosts=False)
        self._handles = []

    async def _stop_placed(self) -> None:
        """Kill the namespace's placed-agent actors; hosts start them again as runs need them.

        A run's agents there start again from their states on a new actor,
        as after the loss of its node.
        """
        placed = await anyio.to_thread.run_sync(self._named_actors, "actorflow-placed.")
        await self._stop([h for h, _ in placed], [n for _, n in placed], hosts=False)

    # --- inside ------------------------------------------------------------------------------

    async def _stop(
        self, actors: list[ActorHandle[Any]], names: list[str], *, hosts: bool = True
    ) -> None:
        """Stop actors, then kill them; hosts stop their runtimes first (``connect_timeout``).

        Returns once their ``names`` are free, so new actors can take them.
        """
        for handle in actors:
            if hosts:
                try:
                    with anyio.move_on_after(self.connect_timeout):
                        await wait_ref(as_host(handle).stop.remote())
                except RayError:
                    pass  # dead already: nothing to stop gracefully
            await anyio.to_thread.run_sync(ray.kill, handle)
        with anyio.move_on_after(self.connect_timeout):
            # Ray's GCS frees a killed actor's name soon after; it has no event to wait on
            while await anyio.to_thread.run_sync(self._any_named, names):  # noqa: ASYNC110
                await anyio.sleep(0.05)

    def _any_named(self, names: list[str]) -> bool:
        for name in names:
            try:
                ray.get_actor(name, namespace=self.namespace)
            except ValueError:
                continue
            return True
        return False

    def _named_actors(self, prefix: str) -> list[tuple[ActorHandle[Any], str]]:
        """The namespace's live actors whose name starts with ``prefix``: (handle, name)."""
        found = []
        for entry in ray.util.list_named_actors(all_namespaces=True):
            if entry["namespace"] == self.namespace and entry["name"].startswith(prefix):
                try:
                    found.append(
                        (ray.get_actor(entry["name"], namespace=self.namespace), entry["name"])
                    )
                except ValueError:
                    pass  # gone since it was listed
        return found

    def _location(self, runtime: ClusterRuntime) -> str:
        if self._store is not None:
            return self._store
        store = runtime.store
        url = getattr(store, "url", None)  # a database store's URL, which open_store takes
        if isinstance(url, str):
            return url
        path = getattr(store, "path", None)  # a file store's folder
        if isinstance(path, str):
            return os.path.abspath(path)
        raise ConfigurationError(
            "RayCluster(store=...)",
            None,
            f"the store's location as the cluster's nodes see it: {type(store).__name__} cannot "
            "say, so give RayCluster(store='s3://bucket/prefix', store_options={'endpoint_url': "
            "..., ...}) or store='postgresql://…'",
        )

    async def _connect(self) -> None:
        if ray.is_initialized():
            return
        address = self.address
        if address not in ("auto", "local") and not address.startswith("ray://"):
            await _check_answers(address, min(self.connect_timeout, 10.0))
        try:
            with anyio.fail_after(self.connect_timeout):
                await anyio.to_thread.run_sync(self._init, abandon_on_cancel=True)
        except TimeoutError as exc:
            raise ClusterUnreachableError(address, "no answer in time") from exc
        except (ConnectionError, RuntimeError) as exc:
            raise ClusterUnreachableError(address, describe(exc)) from exc
        self._initialised_ray = True

    def _init(self) -> None:
        kwargs: dict[str, Any] = {"namespace": self.namespace, "log_to_driver": False}
        if self.runtime_env is not None:
            kwargs["runtime_env"] = self.runtime_env
        ray.init(address=self.address, **kwargs)

    def _start_hosts(self, spec: HostSpec, indexes: Sequence[int]) -> list[ActorHandle[Any]]:
        actor = ray.remote(Host)
        handles: list[ActorHandle[Any]] = []
        for index in indexes:
            name = f"actorflow-host-{index}"
            options: dict[str, Any] = {
                "name": name,
                "namespace": self.namespace,
                "get_if_exists": True,
                "lifetime": "detached",  # runs outlive the driver that started them
                "max_restarts": -1,  # a host lost with its node comes back elsewhere
                "max_task_retries": 0,  # retries are actorflow's
                "max_concurrency": 10_000,
                "scheduling_strategy": "SPREAD",
                **self.host_placement.ray_options(),
            }
            if self.runtime_env is not None:
                options["runtime_env"] = self.runtime_env
            host_spec = msgspec.structs.replace(spec, name=name)
            handle = actor.options(**options).remote(encode(host_spec))
            assert not isinstance(handle, type)  # Ray's stub allows the class too: it never is
            handles.append(handle)
        return handles


def _started_by(spec: bytes) -> str:
    """Which driver connection started a host, from its spec (``""``: not said)."""
    try:
        return msgspec.msgpack.decode(spec, type=_StartedBy).started_by
    except msgspec.DecodeError:
        return ""


class _StartedBy(msgspec.Struct):
    started_by: str = ""


async def _check_answers(address: str, timeout: float) -> None:  # noqa: ASYNC109
    """Fail fast on a ``host:port`` nothing listens on (``ray.init`` would wait long)."""
    host, _, port = address.rpartition(":")
    try:
        with anyio.fail_after(timeout):
            stream = await anyio.connect_tcp(host or "127.0.0.1", int(port))
    except (OSError, ValueError, TimeoutError, socket.gaierror) as exc:
        raise ClusterUnreachableError(address, describe(exc)) from exc
    await stream.aclose()
