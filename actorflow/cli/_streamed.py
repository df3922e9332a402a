"""How ``actorflow log --follow`` shows a run's streamed events (its ephemeral emits).

They come from the store's event stream, not the log, and have positions of
their own: a line shows one as ``~position`` (``--event-start`` resumes from
it), and a gap (events the owner dropped, or that the store's bound removed
before they were read) as a ``lost`` line. With ``--json`` each is one object
with ``event_position``; log records keep ``position``.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from actorflow.cli._render import esc, out
from actorflow.errors import CorruptedDataError
from actorflow.runtime import EmitsLost, EmitStreamed, reading

__all__ = ["print_streamed"]

_UNREADABLE = "<not MessagePack>"


def _event(item: EmitStreamed) -> Any:
    try:
        return reading.plain(item.decode())
    except CorruptedDataError:
        return _UNREADABLE


def print_streamed(item: EmitStreamed | EmitsLost, *, as_json: bool) -> None:
    """One streamed event, or one gap: a line for people, or one JSON object per line."""
    if as_json:
        match item:
            case EmitStreamed():
                data: dict[str, Any] = {
                    "event_position": item.position,
                    "streamed": True,
                    "agent": item.agent,
                    "type": item.type,
                    "time": item.time,
                    "event": _event(item),
                }
            case EmitsLost():
                data = {"event_position": item.position, "lost": item.count}
        sys.stdout.write(json.dumps(data, default=str) + "\n")
        return
    where = f"~{item.position}"
    match item:
        case EmitStreamed():
            text = json.dumps(_event(item), default=str)
            text = text if len(text) <= 60 else text[:57] + "..."
            out().print(
                f"{where:>6} [blue]streamed[/] [bold]{esc(item.type)}[/] by "
                f"{esc(item.agent)}: {esc(text)}"
            )
        case EmitsLost():
            out().print(
                f"{where:>6} [yellow]lost[/] {item.count} streamed event(s): dropped before "
                "they were read"
            )
