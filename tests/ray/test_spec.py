"""What a driver tells apart in a running host's setup (``spec_differences``): names only."""

from __future__ import annotations

from types import SimpleNamespace
from typing import TYPE_CHECKING

import msgspec
import pytest

from actorflow import RuntimeConfig
from actorflow.errors import ConfigurationError, HostsOutdatedError
from actorflow.ray._spec import HostSpec, decode_config, encode, spec_differences

if TYPE_CHECKING:
    from pathlib import Path


def spec(**changes: object) -> HostSpec:
    base = HostSpec(
        name="actorflow-host-0",
        namespace="ns",
        store="s3://runs/prod",
        started_by="driver-a",
        store_options={"aws_secret_access_key": "hunter2"},
        config=encode(RuntimeConfig(code_version="v1")),
        imports=("app.flows",),
    )
    return msgspec.structs.replace(base, **changes)


def test_the_same_setup_from_another_driver_differs_in_nothing() -> None:
    theirs = spec(name="actorflow-host-1", started_by="driver-b")
    assert spec_differences(spec(), encode(theirs)) == []


def test_differences_are_named_field_by_field_down_to_the_config() -> None:
    theirs = spec(
        config=encode(RuntimeConfig(code_version="v0")),
        imports=("app.old",),
        store_options={"aws_secret_access_key": "older-secret"},
    )
    found = spec_differences(spec(), encode(theirs))
    assert found == ["store_options", "config.code_version", "imports"]
    message = str(HostsOutdatedError("ns", ["actorflow-host-0"], found))
    assert "secret" not in message.replace("store_options", "")
    assert "replace_hosts=True" in message


def test_a_host_of_an_older_or_foreign_actorflow_differs_in_everything() -> None:
    assert spec_differences(spec(), b"") == [
        "everything (the host was started by an older actorflow)"
    ]
    assert spec_differences(spec(), b"\xc1 not msgpack") == [
        "everything (the host's spec does not decode here)"
    ]


def test_a_config_this_version_cannot_read_differs_as_a_whole() -> None:
    config = msgspec.msgpack.encode({"code_version": "v1", "a_future_option": 3})
    assert spec_differences(spec(), encode(spec(config=config))) == ["config"]


def test_a_host_refuses_a_config_with_options_it_does_not_know() -> None:
    config = msgspec.msgpack.encode({"code_version": "v1", "a_future_option": 3})
    with pytest.raises(ConfigurationError, match=r"a_future_option.*same version on every node"):
        decode_config(config)


def test_a_database_store_is_given_to_hosts_by_its_url(tmp_path: Path) -> None:
    from actorflow.ray import RayCluster
    from actorflow.storage import SqliteStore

    runtime = SimpleNamespace(store=SqliteStore(tmp_path / "runs.db"))
    # where hosts open the store: the file, not a folder of its name (a FileStore)
    location = RayCluster()._location(runtime)
    assert location == f"sqlite:///{tmp_path / 'runs.db'}"


def test_a_postgres_store_is_given_to_hosts_by_a_url_that_opens_the_same_schema() -> None:
    pytest.importorskip("psycopg")
    from actorflow.ray import RayCluster
    from actorflow.storage import PostgresStore, open_store

    given = "postgresql://app:pw@db.internal/agents?sslmode=disable&application_name=a%20b"
    store = PostgresStore(given, schema="team_a")
    location = RayCluster()._location(SimpleNamespace(store=store))
    assert location == f"{given}&schema=team_a"
    again = open_store(location)  # what a host opens: the same server, options and schema
    assert isinstance(again, PostgresStore)
    assert (again.dsn, again.schema) == (store.dsn, store.schema)
    # a key=value DSN names no URL: the driver is told to give one
    with pytest.raises(ConfigurationError, match=r"postgresql://"):
        RayCluster()._location(SimpleNamespace(store=PostgresStore("host=db dbname=agents")))
