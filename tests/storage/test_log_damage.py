"""``read_log(start)`` reads what it is asked for: a damaged record before ``start`` (one
a checkpoint covers) never stops it, on each store that can hold damage, while a reader
of the whole log still meets the damage (``actorflow validate`` reports it).

The file store's own cases (each part of a frame, damage that hides where the next
record begins) are in ``test_corruption.py``; here the S3 store is held to the same.
The memory store holds no bytes to damage.
"""

from __future__ import annotations

import struct
from typing import TYPE_CHECKING

import pytest

from actorflow.errors import LogCorruptedError
from actorflow.storage import RunManifest, StepRecord
from tests.storage.factories_s3 import open_s3_store

if TYPE_CHECKING:
    from tests.storage.s3_servers import S3Server

RUN = "damaged"


def step(i: int) -> StepRecord:
    return StepRecord(step_id=f"main/{i}", kind="ask", target="a", result=b"result %d" % i)


@pytest.fixture(params=["seaweed_server", "moto_server"], ids=["seaweed", "moto"])
def server(request: pytest.FixtureRequest) -> S3Server:
    """Each S3-compatible server."""
    result: S3Server = request.getfixturevalue(request.param)
    return result


async def test_s3_reads_past_a_damaged_record_before_start(server: S3Server) -> None:
    store = open_s3_store(server)
    try:
        await store.create_run(RunManifest(run_id=RUN, workflow="w", input=b"", input_hash=""))
        await store.append(RUN, [step(0), step(1), step(2)])  # one segment object
        key = store._objects.key(RUN, "log", f"{0:020d}")
        client = server.client()
        stored = client.get_object(Bucket=server.bucket, Key=key)
        body = bytearray(stored["Body"].read())
        (first,) = struct.unpack_from(">I", body, 0)
        body[4 + first + 4 + 40] ^= 0x5A  # inside record 1's sealed payload
        client.put_object(
            Bucket=server.bucket, Key=key, Body=bytes(body), Metadata=stored["Metadata"]
        )

        assert await store.read_log(RUN, 2) == [step(2)]
        assert await store.log_length(RUN) == 3
        assert await store.append(RUN, [step(3)]) == 4
        assert await store.read_log(RUN, 2) == [step(2), step(3)]
        with pytest.raises(LogCorruptedError, match="position 1"):
            await store.read_log(RUN)
    finally:
        await store.aclose()
