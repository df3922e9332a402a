"""The S3-compatible server the benchmarks measure against, when it is installed."""

from __future__ import annotations

import contextlib
import shutil
import sys
from pathlib import Path
from typing import TYPE_CHECKING

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.storage.s3_servers import S3Server, seaweed

if TYPE_CHECKING:
    from collections.abc import Iterator

__all__ = ["local_seaweed"]


@contextlib.contextmanager
def local_seaweed(folder: Path) -> Iterator[S3Server | None]:
    """SeaweedFS ``weed mini`` on 127.0.0.1 with its data in ``folder``, stopped after;
    ``None`` when ``weed`` is not installed (the S3 rows are then left out)."""
    if not (shutil.which("weed") or (Path(sys.executable).parent / "weed").exists()):
        yield None
        return
    (folder / "weed").mkdir(exist_ok=True)
    server = seaweed(folder / "weed")
    server.start()
    try:
        yield server
    finally:
        server.stop()
