"""A live run's page: its records, streamed tokens and status as server-sent events.

``/runs/RUN/events`` follows the run with ``watch_run`` (the engine's
``runtime.watch``), from the log and event-stream positions the page was
rendered at. Each event's id is ``LOG:EVENTS``, the positions after it, so a
browser that lost the connection reconnects with ``Last-Event-ID`` and
resumes where it stopped, missing nothing and repeating nothing. The stream
ends with an ``end`` event once the run stops (finished, paused, blocked).
"""

from __future__ import annotations

import contextlib
import json
from typing import TYPE_CHECKING, Any, Final

from starlette.responses import StreamingResponse

from actorflow.errors import CorruptedDataError
from actorflow.runtime import (
    CheckpointSaved,
    EmitsLost,
    EmitStreamed,
    RunEnded,
    StatusChanged,
    reading,
    watch_run,
)
from actorflow.storage import validate_run_id

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from starlette.requests import Request

    from actorflow.runtime import WatchEvent
    from actorflow.storage import Store

__all__ = ["POLL", "events", "token_text"]

POLL: Final = 0.05
"""Seconds between two reads of a followed run's store (the file store has no push to readers)."""


def _positions(request: Request) -> tuple[int, int]:
    """Where to start: after the ``Last-Event-ID`` a reconnecting browser sends, else the URL's."""
    last = request.headers.get("last-event-id", "")
    log, _, stream = last.partition(":")
    if log.isdigit() and stream.isdigit():
        return int(log), int(stream)
    start = request.query_params.get("from", "0")
    stream_start = request.query_params.get("events_from", "0")
    return (
        int(start) if start.isdigit() else 0,
        int(stream_start) if stream_start.isdigit() else 0,
    )


def token_text(value: Any) -> str:
    """An emitted event as text: a string as is, else its ``text`` (or ``token``), else JSON."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict):
        for key in ("text", "token", "delta", "content"):
            if isinstance(value.get(key), str):
                return str(value[key])
    return json.dumps(reading.plain(value), ensure_ascii=False, default=str) + "\n"


def _describe(event: WatchEvent) -> tuple[str, dict[str, Any]]:
    match event:
        case EmitStreamed():
            try:
                text = token_text(event.decode())
            except CorruptedDataError as exc:
                text = f"[undecodable event: {exc}]"
            return "token", {"agent": event.agent, "type": event.type, "text": text}
        case EmitsLost(count=count):
            return "lost", {"count": count}
        case StatusChanged(status=status, prompt=prompt):
            return "status", {"status": str(status), "prompt": prompt}
        case CheckpointSaved(snapshot=info):
            return "checkpoint", {"id": info.snapshot_id, "position": info.position}
        case RunEnded(status=status):
            return "ended", {"status": str(status)}
        case _:
            record = reading.record_to_dict(event.record)
            keep = ("tag", "step_id", "kind", "target", "type", "name", "time")
            return "record", {"position": event.position, **{k: record.get(k) for k in keep}}


def _advance(event: WatchEvent, log: int, stream: int) -> tuple[int, int]:
    match event:
        case EmitStreamed(position=position):
            return log, position + 1
        case EmitsLost(position=position, count=count):
            return log, position + count
        case StatusChanged() | CheckpointSaved():
            return log, stream
        case RunEnded(position=position):
            return max(log, position), stream
        case _:
            return max(log, event.position + 1), stream


async def events(store: Store, request: Request, run_id: str) -> StreamingResponse:
    """The run's news as server-sent events, from where the page (or the last event) left off."""
    validate_run_id(run_id)
    await store.read_run(run_id)  # an unknown run is a page saying so, not an empty stream
    log, stream = _positions(request)

    async def lines() -> AsyncIterator[str]:
        nonlocal log, stream
        yield "retry: 500\n\n"
        watch = watch_run(
            store, run_id, position=log, poll_interval=POLL, events=True, event_position=stream
        )
        async with contextlib.aclosing(watch):  # closed on the loop when the browser leaves
            async for event in watch:
                log, stream = _advance(event, log, stream)
                name, data = _describe(event)
                payload = json.dumps(data, ensure_ascii=False, default=str)
                yield f"id: {log}:{stream}\nevent: {name}\ndata: {payload}\n\n"
        yield f"id: {log}:{stream}\nevent: end\ndata: {{}}\n\n"

    headers = {"Cache-Control": "no-store", "X-Accel-Buffering": "no"}
    return StreamingResponse(lines(), media_type="text/event-stream", headers=headers)
