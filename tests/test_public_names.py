"""``actorflow.runtime`` lists what users call; implementers' names have modules of their own."""

from __future__ import annotations

import actorflow.runtime
import actorflow.runtime.cluster
import actorflow.runtime.registry

# public in actorflow.runtime before they had their own modules: still importable from there
MOVED = ("AgentPlacer", "Cluster", "ClusterRuntime", "RemoteStep", "class_name", "lookup")


def test_the_cluster_interface_and_the_registry_have_modules_of_their_own() -> None:
    assert set(actorflow.runtime.cluster.__all__) == {
        "AgentPlacer",
        "Cluster",
        "ClusterRuntime",
        "LimitsCluster",
        "RemoteStep",
        "config_types",
    }
    assert set(actorflow.runtime.registry.__all__) == {
        "class_name",
        "lookup",
        "module_of",
        "register",
    }
    assert not set(MOVED) & set(actorflow.runtime.__all__)
    assert actorflow.runtime.Cluster.__module__ == "actorflow.runtime.cluster"
    assert actorflow.runtime.lookup.__module__ == "actorflow.runtime.registry"


def test_users_still_register_classes_from_the_runtime() -> None:
    assert "register" in actorflow.runtime.__all__
    assert actorflow.runtime.register is actorflow.runtime.registry.register


def test_the_old_import_paths_still_work() -> None:
    for name in MOVED:
        home = (
            actorflow.runtime.cluster
            if name in actorflow.runtime.cluster.__all__
            else actorflow.runtime.registry
        )
        assert getattr(actorflow.runtime, name) is getattr(home, name), name
