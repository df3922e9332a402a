"""actorflow on a Ray cluster: hosts that drive runs, placed agents, failover (``actorflow[ray]``).

- :class:`RayCluster`: ``Runtime(store=..., cluster=RayCluster(...))`` runs the
  runtime's workflow runs on hosts (detached Ray actors, each a full actorflow
  runtime on the shared store) and takes over a dead host's runs on the others.
- :class:`Placement`: ``placement = Placement(num_gpus=1)`` on an agent class
  puts its agents on Ray actors on nodes with those resources.
- :class:`RayPlacer`, :class:`PlacedRef`: what places agents, and a reference to one.
- :class:`RayLimits`: the hosts' ``Limit`` budgets, one Ray actor per key in the cluster.

See docs/scale-out.md.
"""

from __future__ import annotations

try:
    import ray as _ray  # noqa: F401
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError(
        "actorflow.ray needs Ray: install the extra with `pip install 'actorflow[ray]'`"
    ) from exc

from actorflow.ray._cluster import RayCluster
from actorflow.ray._limits import RayLimits
from actorflow.ray._placed_ref import PlacedRef
from actorflow.ray._placement import Placement
from actorflow.ray._placer import RayPlacer
from actorflow.ray._spec import HostInfo

__all__ = ["HostInfo", "PlacedRef", "Placement", "RayCluster", "RayLimits", "RayPlacer"]

for _name in __all__:
    globals()[_name].__module__ = __name__
del _name
