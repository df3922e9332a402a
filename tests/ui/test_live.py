"""A live run's page as server-sent events: records, streamed tokens, status; resumed by id."""

from __future__ import annotations

import json

from actorflow.runtime import RunEnded
from tests.ui.live_app import ChatFinish, ChatGo
from tests.ui.test_actions import _until, live_chat, session


def _events(text: str) -> list[tuple[str, str, dict[str, object]]]:
    """(id, event, data) of each server-sent event in ``text``."""
    found = []
    for block in text.split("\n\n"):
        fields = dict(line.split(": ", 1) for line in block.splitlines() if ": " in line)
        if "event" in fields:
            found.append((fields.get("id", ""), fields["event"], json.loads(fields["data"])))
    return found


async def test_the_stream_carries_records_tokens_and_status_to_the_end() -> None:
    async with live_chat() as (runtime, app), session(app) as client:
        await runtime.signal("chat", ChatGo("tide", 3))
        await runtime.signal("chat", ChatFinish("ok <script>"))
        await _until(runtime, "chat", lambda e: isinstance(e, RunEnded))
        reply = await client.get("/runs/chat/events?from=0&events_from=0")
        assert reply.headers["content-type"].startswith("text/event-stream")
        events = _events(reply.text)
        kinds = [e for _, e, _ in events]
        assert kinds.count("record") >= 4
        assert kinds[-2:] == ["ended", "end"]
        assert [d["text"] for _, e, d in events if e == "token"] == [
            "tide-0 ",
            "tide-1 ",
            "tide-2 ",
        ]
        assert {d.get("kind") for _, e, d in events if e == "record"} >= {"wait", "now"}
        ids = [i for i, _, _ in events]
        assert all(":" in i for i in ids)


async def test_a_dropped_connection_resumes_after_the_last_event_it_saw() -> None:
    async with live_chat() as (runtime, app), session(app) as client:
        await runtime.signal("chat", ChatGo("tide", 3))
        await runtime.signal("chat", ChatFinish("ok"))
        await _until(runtime, "chat", lambda e: isinstance(e, RunEnded))
        whole = _events((await client.get("/runs/chat/events")).text)
        cut = next(i for i, (_, e, _) in enumerate(whole) if e == "token")
        last_id = whole[cut][0]
        rest = _events(
            (await client.get("/runs/chat/events", headers={"last-event-id": last_id})).text
        )

        def seen(events: list[tuple[str, str, dict[str, object]]]) -> list[object]:
            return [(e, d.get("position"), d.get("text")) for _, e, d in events if e != "status"]

        assert seen(rest) == seen(whole[cut + 1 :])


async def test_an_unknown_run_has_no_stream_but_a_page_saying_so() -> None:
    async with live_chat() as (_, app), session(app) as client:
        reply = await client.get("/runs/nobody/events")
        assert reply.status_code == 404
        assert "nobody" in reply.text
