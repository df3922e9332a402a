"""A placed agent's ref is an ``ActorRef``, a peer of ``LocalRef``; users never build one."""

from __future__ import annotations

import pytest

from actorflow import ActorRef
from actorflow.ray import PlacedRef
from actorflow.runtime import LocalRef


def test_placed_and_local_refs_are_peers_behind_the_actor_ref_interface() -> None:
    assert issubclass(PlacedRef, ActorRef)
    assert not issubclass(PlacedRef, LocalRef)
    assert not issubclass(LocalRef, PlacedRef)


def test_placed_refs_cannot_be_constructed_by_users() -> None:
    with pytest.raises(TypeError, match="PlacedRef has no public constructor"):
        PlacedRef()
