"""A process that claims a run on a PostgreSQL store and holds it (the vanished-peer test).

    python -m tests.storage.postgres.claim_child URL RUN_ID

prints ``claimed`` once it holds the run, then waits (bounded) to be killed.
"""

from __future__ import annotations

import sys

import anyio
import msgspec

from actorflow.storage import RunManifest, RunStatus
from actorflow.storage.postgres import PostgresStore

HOLD = 120.0
"""Seconds the claim is held at most: the test kills this process long before."""


async def main(url: str, run_id: str) -> None:
    store = PostgresStore(url, connect_attempts=2)
    await store.create_run(
        RunManifest(
            run_id=run_id,
            workflow="Held",
            input=msgspec.msgpack.encode(None),
            input_hash="h",
            status=RunStatus.RUNNING,
            created=1_700_000_000.0,
            updated=1_700_000_000.0,
        )
    )
    await store.claim(run_id, "vanishing:1:a")
    print("claimed", flush=True)
    await anyio.sleep(HOLD)


if __name__ == "__main__":
    anyio.run(main, sys.argv[1], sys.argv[2])
