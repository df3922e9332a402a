"""Every async test runs on asyncio and on trio, through anyio's pytest plugin."""

from __future__ import annotations

import pytest

# s3_servers: the session-scoped S3-compatible servers (SeaweedFS, moto) the S3 tests use;
# pg_server: the session-scoped PostgreSQL server the PostgreSQL store's tests use;
# pytester: runs pytest on test modules a user would write (the shipped conformance suite).
pytest_plugins = ["anyio", "pytester", "tests.storage.s3_servers", "tests.storage.pg_server"]


@pytest.fixture(
    params=[
        pytest.param("asyncio", id="asyncio"),
        pytest.param("trio", id="trio"),
    ]
)
def anyio_backend(request: pytest.FixtureRequest) -> str:
    """Both event loops for every async test (``anyio_mode = "auto"`` in pyproject)."""
    return str(request.param)
