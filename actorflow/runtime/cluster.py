"""For implementers of a cluster engine: what ``Runtime(cluster=...)`` asks of it.

Users pass a cluster (``actorflow.ray.RayCluster``) and need nothing here. A
cluster engine implements :class:`Cluster` (where runs and placed agents go)
and :class:`AgentPlacer` (starting a run's agents in another process), may keep
``Limit`` budgets for all its processes (:class:`LimitsCluster`), learns
of the runtime it serves through :class:`ClusterRuntime`, and carries a step
to an agent in another process and its report back with :class:`RemoteStep`.
A ``RuntimeConfig`` shipped to another process as MessagePack decodes there
field by field with :func:`config_types`. Classes by stable name, which a
remote process resolves, are in :mod:`actorflow.runtime.registry`.
"""

from __future__ import annotations

from actorflow.runtime.workflow._cluster import (
    AgentPlacer,
    Cluster,
    ClusterRuntime,
    LimitsCluster,
    RemoteStep,
)
from actorflow.runtime.workflow._config import config_types

__all__ = [
    "AgentPlacer",
    "Cluster",
    "ClusterRuntime",
    "LimitsCluster",
    "RemoteStep",
    "config_types",
]

for _name in __all__:
    globals()[_name].__module__ = __name__
del _name
