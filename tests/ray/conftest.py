"""One local three-node Ray cluster per test module (``ray.cluster_utils.Cluster``).

The head and one worker node have a CPU each; the third has a CPU and the
``special`` resource placed agents ask for. Hosts reserve a CPU, so two hosts
land on two different nodes. Health checks are short, so a removed node is
declared dead within about a second.
"""

from __future__ import annotations

import os
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pytest

try:
    import ray
    import ray.cluster_utils as cluster_utils
except ImportError:  # the `ray` extra is not installed: these tests are not collected
    collect_ignore_glob = ["test_*.py"]

from actorflow.storage import open_store
from tests.storage.pg_server import pg_url

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

    from actorflow.storage import Store

SYSTEM_CONFIG = {
    "health_check_initial_delay_ms": 0,
    "health_check_period_ms": 200,
    "health_check_failure_threshold": 3,
}
"""A dead node is declared dead ~0.6 s after it stops answering."""

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class LocalCluster:
    """The module's cluster, and what the tests need to know of it."""

    def __init__(self) -> None:
        self.cluster = cluster_utils.Cluster(
            initialize_head=True,
            head_node_args={
                "num_cpus": 1,
                "include_dashboard": False,
                "_system_config": SYSTEM_CONFIG,
            },
        )
        self.plain = self.cluster.add_node(num_cpus=1)
        self.special = self.cluster.add_node(num_cpus=1, resources={"special": 1})
        self.cluster.wait_for_nodes()

    @property
    def address(self) -> str:
        return str(self.cluster.address)

    def node(self, node_id: str) -> Any:
        """The cluster's node object for a Ray node id."""
        for node in [self.cluster.head_node, *self.cluster.worker_nodes]:
            if node.node_id == node_id:
                return node
        raise LookupError(node_id)

    def is_head(self, node_id: str) -> bool:
        head: Any = self.cluster.head_node
        return bool(head.node_id == node_id)

    def remove(self, node: Any) -> None:
        """Remove ``node`` at once: its processes are killed, not stopped."""
        self.cluster.remove_node(node, allow_graceful=False)

    def add_like(self, node: Any) -> None:
        """Add a node like the removed ``node`` (so later tests have three again)."""
        special = node is self.special
        new = self.cluster.add_node(num_cpus=1, resources={"special": 1} if special else {})
        if special:
            self.special = new
        elif node is self.plain:
            self.plain = new


@pytest.fixture(scope="module")
def ray_cluster() -> Iterator[LocalCluster]:
    """The module's three-node cluster, with this process connected as a driver."""
    os.environ.setdefault("PYTHONPATH", ROOT)
    local = LocalCluster()
    ray.init(address=local.address, namespace="actorflow-tests", log_to_driver=False)
    try:
        yield local
    finally:
        ray.shutdown()
        local.cluster.shutdown()  # type: ignore[no-untyped-call]


@dataclass
class SharedStore:
    """A store every node of the cluster reaches: where it is, and how to open it."""

    location: str
    options: dict[str, Any] = field(default_factory=dict)
    by_url: bool = False
    """The cluster is not told where the store is: hosts open the driver's store by its URL."""

    def open(self) -> Store:
        """The driver's own store object on it."""
        return open_store(self.location, **self.options)


LEASE_TTL = 3.0
"""The S3 stores' lease TTL in these tests: a dead host's runs are orphans this much later."""


@pytest.fixture(
    params=["file", "s3", "sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
)
def shared_store(request: pytest.FixtureRequest, tmp_path: Path) -> SharedStore:
    """The shared store: a folder or an SQLite file on this machine (all nodes are here), S3,
    a PostgreSQL schema of the test's own (hosts open it by the driver's store's URL)."""
    if request.param == "file":
        return SharedStore(str(tmp_path / "store"))
    if request.param == "sqlite":
        return SharedStore(f"sqlite:///{tmp_path / 'store.db'}")
    if request.param == "postgres":
        pg = request.getfixturevalue("pg_server")
        return SharedStore(pg_url(pg, pg.schema()), by_url=True)
    server = request.getfixturevalue("seaweed_server")
    return SharedStore(
        f"s3://{server.bucket}/ray-{uuid.uuid4().hex[:10]}",
        {
            "endpoint_url": server.url,
            "region_name": "us-east-1",
            "aws_access_key_id": server.access_key,
            "aws_secret_access_key": server.secret_key,
            "lease_ttl": LEASE_TTL,
        },
    )


@pytest.fixture
def namespace() -> str:
    """A Ray namespace of the test's own: its hosts and placed agents are its own."""
    return f"t-{uuid.uuid4().hex[:10]}"
