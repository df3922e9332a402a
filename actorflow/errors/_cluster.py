"""Errors of a cluster engine (``actorflow.ray``): reaching it, shipping code, starting hosts."""

from __future__ import annotations

from actorflow.errors._base import ActorflowError

__all__ = [
    "ClassNotShippedError",
    "ClusterError",
    "ClusterUnreachableError",
    "HostStartError",
    "HostsOutdatedError",
]

SHIP_CODE_HINT = (
    "ship your code to the cluster's workers: RayCluster(runtime_env={'working_dir': "
    "'path/to/project'}) or runtime_env={'py_modules': [your_module]}, and import the "
    "module that defines it with RayCluster(imports=['your_module'])"
)


class ClusterError(ActorflowError):
    """Something about the cluster the runtime runs on (``Runtime(cluster=...)``).

    .. versionadded:: 0.4
    """


class ClusterUnreachableError(ClusterError, ConnectionError):
    """The cluster's address does not answer; nothing was started on it.

    .. versionadded:: 0.4
    """

    def __init__(self, address: str, detail: str) -> None:
        self.address = address
        self.detail = detail
        super().__init__(
            f"cannot connect to the Ray cluster at {address!r}: {detail}; start it "
            "(`ray start --head`) or give RayCluster(address=...) the head node's "
            "'host:port' (or 'auto' on a node of the cluster)"
        )


class ClassNotShippedError(ClusterError):
    """A process of the cluster cannot import a class a run needs (its code was not shipped).

    .. versionadded:: 0.4
    """

    def __init__(self, class_name: str, where: str, detail: str = "") -> None:
        self.class_name = class_name
        self.where = where
        self.detail = detail
        more = f" ({detail})" if detail else ""
        super().__init__(
            f"class {class_name!r} is not importable on {where}{more}: {SHIP_CODE_HINT}"
        )


class HostStartError(ClusterError):
    """A cluster's host could not start its runtime (its store unreachable, say).

    .. versionadded:: 0.4
    """

    def __init__(self, host: str, detail: str, hint: str | None = None) -> None:
        self.host = host
        self.detail = detail
        if hint is None:
            hint = (
                "every node must reach the store: give RayCluster(store='s3://bucket/prefix', "
                "store_options={...}) a location and options that work on the cluster's nodes "
                "(a folder only for a one-machine cluster)"
            )
        super().__init__(f"host {host!r} could not start: {detail}; {hint}")


class HostsOutdatedError(ClusterError):
    """The namespace's running hosts were started with another setup than this driver's.

    Hosts are detached: they outlive the driver that started them, with its
    store, options, imports and code. Nothing was changed; their runs go on.

    .. versionadded:: 0.4
    """

    def __init__(self, namespace: str, hosts: list[str], differences: list[str]) -> None:
        self.namespace = namespace
        self.hosts = hosts
        self.differences = differences
        super().__init__(
            f"host(s) {', '.join(hosts)} of Ray namespace {namespace!r} run with another "
            f"setup than this driver's (differs: {', '.join(differences)}); replace them "
            "with RayCluster(replace_hosts=True) (their runs are interrupted and taken over "
            "by the new hosts), stop them with `await cluster.stop_hosts()`, or use "
            "another namespace"
        )
