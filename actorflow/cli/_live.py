"""``actorflow show RUN live``: a run as ``runtime.query`` reads it, for people or as JSON.

The data comes from the same query the library gives (``query_run``: the
newest snapshot plus the log after it, and the untaken inbox), so it takes no
claim and works while another process owns the run. Stored values (agent
states, inbox payloads, a result) are decoded as plain MessagePack, without
their classes, as everywhere in the CLI.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import msgspec
from rich.table import Table

from actorflow.cli._render import esc, out, status_text, when
from actorflow.runtime import reading
from actorflow.runtime.reading import query_run

if TYPE_CHECKING:
    from actorflow.storage import StateRef, Store

__all__ = ["live_to_dict", "print_live"]

_STATE_CHARS = 80


async def live_to_dict(store: Store, run_id: str) -> dict[str, Any]:
    """The run's query as plain data: agent states, inbox payloads and the result decoded.

    Raises:
        InvalidRunIdError: not a valid run id.
        RunNotFoundError: no such run.
    """
    query = await query_run(store, run_id)
    data: dict[str, Any] = reading.plain(msgspec.to_builtins(query))
    for name, agent in query.agents.items():
        data["agents"][name]["state"] = await _state(store, run_id, agent.state)
    data["inbox"] = [
        {**reading.plain(msgspec.to_builtins(e)), "payload": reading.decode_plain(e.payload)}
        for e in query.inbox
    ]
    data["result"] = reading.decode_plain(query.result)
    return data


async def _state(store: Store, run_id: str, ref: StateRef | None) -> Any:
    if ref is None:
        return None
    data = ref.data if ref.data is not None else await store.get_blob(run_id, ref.blob)
    return reading.decode_plain(data)


def print_live(d: dict[str, Any]) -> None:
    """A query from :func:`live_to_dict`, for people."""
    console = out()
    console.print(
        f"[bold]{esc(d['run_id'])}[/] ({esc(d['workflow'])}): {status_text(d['status'])}, "
        f"phase {esc(d['phase'] or '-')}"
    )
    console.print(
        f"as of log position {d['position']} (read {when(d['as_of'])}); "
        f"owner {esc(d['owner'] or '-')}"
    )
    if d["error"]:
        console.print(f"[red]{esc(d['error']['type'])}: {esc(d['error']['message'])}[/]")
    if d["status"] == "completed":
        console.print(f"result: {_short(d['result'])}")
    if d["phases"]:
        console.print("phases finished: " + ", ".join(esc(p) for p in d["phases"]))
    _agents(d["agents"])
    _waits(d["waits"])
    _inbox(d["inbox"])
    for dec in d["decisions"]:
        conf = "" if dec["confidence"] is None else f" (confidence {dec['confidence']:.2f})"
        console.print(
            f"decision [bold]{esc(dec['type'])}[/] by {esc(dec['agent'])}{conf}: "
            f"{esc(dec['rationale'])}"
        )
    if d["metrics"]:
        console.print(
            "metrics: " + ", ".join(f"{esc(k)} {v:g}" for k, v in sorted(d["metrics"].items()))
        )


def _agents(agents: dict[str, Any]) -> None:
    if not agents:
        out().print("agents: none yet")
        return
    table = Table(title="agents")
    for col in ("agent", "type", "status", "confidence", "state"):
        table.add_column(col, overflow="fold")
    for name, a in agents.items():
        conf = "-" if a["confidence"] is None else f"{a['confidence']:.2f}"
        table.add_row(esc(name), esc(a["type"]), esc(a["status"]), conf, _summary(a["state"]))
    out().print(table)


def _waits(waits: list[dict[str, Any]]) -> None:
    if not waits:
        out().print("waits: none")
        return
    table = Table(title="waits")
    for col in ("step", "waits for", "prompt", "until"):
        table.add_column(col, overflow="fold")
    for w in waits:
        kind = "input" if w["kind"] == "input" else "signal"
        table.add_row(
            esc(w["step_id"]),
            f"{kind} {esc(w['type'])}",
            esc(w["prompt"] if w["prompt"] is not None else "-"),
            when(w["deadline"]) if w["deadline"] is not None else "no deadline",
        )
    out().print(table)


def _inbox(entries: list[dict[str, Any]]) -> None:
    if not entries:
        out().print("inbox: nothing untaken")
        return
    table = Table(title="inbox (sent, not taken yet)")
    for col in ("seq", "kind", "type", "id", "sent", "sender", "payload"):
        table.add_column(col, overflow="fold", justify="right" if col == "seq" else "left")
    for e in entries:
        table.add_row(
            str(e["seq"]),
            esc(e["kind"] or "?"),
            esc(e["type"]),
            esc(e["entry_id"]),
            when(e["sent"]),
            esc(e["sender"] or "-"),
            _short(e["payload"]),
        )
    out().print(table)


def _summary(state: Any) -> str:
    """A state in a cell: a mapping's fields with short values, containers by their size."""
    if isinstance(state, dict):
        parts = [f"{k}: {_brief(v)}" for k, v in state.items()]
        text = ", ".join(parts)
    else:
        text = _brief(state)
    return esc(text if len(text) <= _STATE_CHARS else text[: _STATE_CHARS - 3] + "...")


def _brief(value: Any) -> str:
    if isinstance(value, list | dict):
        return f"<{type(value).__name__} of {len(value)}>"
    text = repr(value) if isinstance(value, str) else str(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _short(value: Any) -> str:
    text = repr(value) if isinstance(value, str) else str(value)
    return esc(text if len(text) <= _STATE_CHARS else text[: _STATE_CHARS - 3] + "...")
