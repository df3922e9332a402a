"""A process that uses an ``S3Store`` and returns without closing it.

Run as ``python -m tests.storage.s3.exit_child <asyncio|trio> <url> <bucket>
<access key> <secret key> <prefix>``. It writes a run and reads it back,
prints ``used``, and leaves the store open: the process must still exit.
"""

from __future__ import annotations

import sys

import anyio

from actorflow.storage import RunManifest, S3Store, StepRecord


async def main(url: str, bucket: str, key: str, secret: str, prefix: str) -> None:
    store = S3Store(
        bucket,
        prefix=prefix,
        endpoint_url=url,
        region_name="us-east-1",
        aws_access_key_id=key,
        aws_secret_access_key=secret,
    )
    await store.create_run(RunManifest(run_id="r", workflow="wf", input=b"\x90", input_hash="h"))
    await store.append("r", [StepRecord(step_id="main/0", kind="ask")])
    assert [r.step_id for r in await store.read_log("r") if isinstance(r, StepRecord)] == ["main/0"]
    print("used", flush=True)
    # no aclose(): a forgotten store must not keep the process alive


if __name__ == "__main__":
    backend, url, bucket, key, secret, prefix = sys.argv[1:]
    anyio.run(main, url, bucket, key, secret, prefix, backend=backend)
