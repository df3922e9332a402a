"""Every async test runs on asyncio and on trio, through anyio's pytest plugin."""

from __future__ import annotations

import pytest

# s3_servers: the session-scoped S3-compatible servers (SeaweedFS, moto) the S3 tests use.
pytest_plugins = ["anyio", "tests.storage.s3_servers"]


@pytest.fixture(
    params=[
        pytest.param("asyncio", id="asyncio"),
        pytest.param("trio", id="trio"),
    ]
)
def anyio_backend(request: pytest.FixtureRequest) -> str:
    """Both event loops for every test marked ``anyio`` (see pytest_collection_modifyitems)."""
    return str(request.param)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # Mark every coroutine test so none can silently run on one loop only.
    import inspect

    for item in items:
        fn = getattr(item, "function", None)
        if fn is not None and inspect.iscoroutinefunction(fn):
            item.add_marker(pytest.mark.anyio)
