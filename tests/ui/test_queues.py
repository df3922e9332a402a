"""The queues view: each queue's runs by status and priority, running against its cap."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

import httpx

from actorflow import Runtime
from actorflow.runtime import Queue
from actorflow.storage import FileStore, RunManifest, RunStatus
from actorflow.ui import create_app

if TYPE_CHECKING:
    from pathlib import Path


def _queued(run_id: str, queue: str, status: RunStatus, priority: int, age: float) -> RunManifest:
    return RunManifest(
        run_id=run_id,
        workflow="Mailer",
        input=b"\xc0",
        input_hash="h",
        status=status,
        queue=queue,
        priority=priority,
        created=time.time() - age,
    )


async def test_queues_show_depth_by_priority_running_against_cap_and_oldest_age(
    tmp_path: Path,
) -> None:
    store = FileStore(tmp_path)
    for manifest in (
        _queued("m-1", "mail", RunStatus.QUEUED, 5, 120.0),
        _queued("m-2", "mail", RunStatus.QUEUED, 5, 30.0),
        _queued("m-3", "mail", RunStatus.QUEUED, 0, 10.0),
        _queued("m-4", "mail", RunStatus.RUNNING, 0, 300.0),
        _queued("m-5", "mail", RunStatus.COMPLETED, 0, 400.0),
        _queued("r-1", "reports", RunStatus.RUNNING, 0, 50.0),
    ):
        await store.create_run(manifest)
    await store.create_run(
        RunManifest(run_id="plain", workflow="Mailer", input=b"\xc0", input_hash="h")
    )
    runtime = Runtime(store=store, queues=[Queue("mail", max_concurrent=2, per_minute=30)])
    app = create_app(store, read_only=True, runtime=runtime)
    transport = httpx.ASGITransport(app=app)
    try:
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
            reply = await client.get("/queues")
            assert reply.status_code == 200, reply.text
            html = reply.text
            mail = html.split('data-queue="mail"')[1].split("</tr>")[0]
            assert "p5: 2" in mail
            assert "p0: 1" in mail
            assert mail.index("p5") < mail.index("p0")  # higher priority first
            assert "1 / 2" in mail  # running against the declared cap
            assert "(30/min)" in mail
            assert "2 min 0 s" in mail or "2 min 1 s" in mail  # the oldest queued waits 120 s
            reports = html.split('data-queue="reports"')[1].split("</tr>")[0]
            assert "1 / <span" in reports  # declared by no runtime here: its cap is unknown
            assert 'data-queue="plain"' not in html
            filtered = (await client.get("/?queue=mail")).text
            assert 'href="/runs/m-1"' in filtered
            assert 'href="/runs/r-1"' not in filtered
            assert 'href="/runs/plain"' not in filtered
            assert '<option value="mail" selected>' in filtered
    finally:
        await store.aclose()
