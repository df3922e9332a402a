"""The suite's own plumbing: async tests really run on both event loops."""

from __future__ import annotations

import sniffio


async def test_async_tests_run_on_the_parametrized_backend(anyio_backend: str) -> None:
    assert sniffio.current_async_library() == anyio_backend
