"""A placed agent whose module only the run imports; placed actors import it by its record."""

from __future__ import annotations

from actorflow.ray import Placement as _Placement
from tests.ray.app import RayWorker


class RayLazyPlaced(RayWorker):
    """Placed like ``RayPlacedWorker``, from a module of its own."""

    placement = _Placement(resources={"special": 1})
