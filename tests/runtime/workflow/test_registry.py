"""Classes by stable name: found after a restart, replaced when redefined, ambiguity named."""

from __future__ import annotations

import pytest

from actorflow import Orchestrator, RunContext
from actorflow.errors import RegistryError
from actorflow.runtime import class_name, lookup, register


def test_a_class_is_found_by_its_qualname_or_its_declared_name() -> None:
    class Plain(Orchestrator):
        async def run(self, ctx: RunContext, _: None) -> None:
            return None

    class Named(Orchestrator):
        __actorflow_name__ = "tests.registry.Named"

    assert class_name(Plain).endswith("<locals>.Plain")
    assert lookup(class_name(Plain)) is Plain
    assert lookup("tests.registry.Named") is Named


def test_a_class_defined_again_in_the_same_module_replaces_the_old_one() -> None:
    def define() -> type:
        class Again(Orchestrator):
            __actorflow_name__ = "tests.registry.Again"

        return Again

    first, second = define(), define()
    assert first is not second
    assert lookup("tests.registry.Again") is second


def test_a_name_shared_by_two_modules_is_an_error_only_when_looked_up() -> None:
    one = type("Shared", (), {"__module__": "app_one", "__actorflow_name__": "tests.Shared"})
    two = type("Shared", (), {"__module__": "app_two", "__actorflow_name__": "tests.Shared"})
    register(one)
    register(two)  # defining both is fine...
    with pytest.raises(RegistryError, match="app_one, app_two"):
        lookup("tests.Shared")  # ...finding one by name is not


def test_an_unknown_name_says_to_import_the_module() -> None:
    with pytest.raises(RegistryError, match="import the module"):
        lookup("nowhere.Nothing")
