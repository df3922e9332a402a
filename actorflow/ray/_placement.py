"""``Placement``: the Ray resources an agent class needs, read from its ``placement``."""

from __future__ import annotations

import math
from typing import Any

import msgspec

from actorflow.errors import ConfigurationError

__all__ = ["Placement", "placement_of"]


class Placement(msgspec.Struct, frozen=True, kw_only=True):
    """The Ray resources an agent class needs: ``placement = Placement(num_gpus=1)``.

    Set it as a class attribute of an agent (a ``Specialist``, say). On a
    runtime with a :class:`RayCluster`, the run's agents of that class live on
    a Ray actor on a node that has these resources: one Ray actor per agent
    class and node, holding the agents of many runs (never one per agent), and
    reserving the resources once. Without a cluster the attribute is ignored.

    Attributes:
        num_cpus: CPUs the class's Ray actor reserves; ``None``: none (it still runs).
        num_gpus: GPUs it reserves.
        memory: bytes of memory it reserves.
        resources: custom Ray resources (``{"embedder": 1}``), as the nodes declare them.

    .. versionadded:: 0.4
    """

    num_cpus: float | None = None
    num_gpus: float | None = None
    memory: int | None = None
    resources: dict[str, float] = {}

    def __post_init__(self) -> None:
        for name, value in self._amounts().items():
            if not (value >= 0 and math.isfinite(value)):
                raise ConfigurationError(f"Placement.{name}", value, "a finite number >= 0")

    def _amounts(self) -> dict[str, float]:
        """What a node must have, under Ray's resource names."""
        wanted = {"CPU": self.num_cpus, "GPU": self.num_gpus, "memory": self.memory}
        out = {key: float(value) for key, value in wanted.items() if value is not None}
        out.update(self.resources)
        return out

    def fits(self, node_resources: dict[str, float]) -> bool:
        """Whether a node with these total resources can ever hold the class's Ray actor."""
        return all(node_resources.get(key, 0.0) >= value for key, value in self._amounts().items())

    def ray_options(self) -> dict[str, Any]:
        """The options of ``ActorClass.options(...)`` that reserve these resources."""
        # Ray would reserve a CPU to schedule an actor that names none
        options: dict[str, Any] = {"num_cpus": self.num_cpus or 0}
        if self.num_gpus is not None:
            options["num_gpus"] = self.num_gpus
        if self.memory is not None:
            options["memory"] = self.memory
        if self.resources:
            options["resources"] = dict(self.resources)
        return options


def placement_of(cls: type) -> Placement | None:
    """The class's ``placement`` attribute, if it is a :class:`Placement`.

    Raises:
        ConfigurationError: ``placement`` is set to something else.
    """
    value = getattr(cls, "placement", None)
    if value is None or isinstance(value, Placement):
        return value
    raise ConfigurationError(f"{cls.__qualname__}.placement", value, "a Placement or None")
