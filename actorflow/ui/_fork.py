"""Fork with an edit, and two runs side by side.

A fork starts from a checkpoint of a run with some agents' states replaced:
the page shows each agent's state there as JSON to edit, and
``runtime.fork(run_id, checkpoint, edit=...)`` checks each against its state
type before anything is stored (an edit that does not fit is refused with the
field named). The new run is driven by the inspector's runtime, which must be
the app's and running (``actorflow ui --app``). The comparison reads both runs
with ``compare_runs`` and takes no claim.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from actorflow.errors import ConfigurationError, ForkEditError, RuntimeNotRunningError
from actorflow.runtime import compare_runs, reading
from actorflow.storage import read_full_snapshot, validate_run_id
from actorflow.ui._actions import read_form
from actorflow.ui._format import pretty
from actorflow.ui._pages import Page

if TYPE_CHECKING:
    from starlette.requests import Request

    from actorflow.runtime import Runtime
    from actorflow.storage import Store

__all__ = ["compare_page", "fork_form", "start_fork"]


async def fork_form(
    store: Store,
    request: Request,
    run_id: str,
    *,
    error: str | None = None,
    values: dict[str, str] | None = None,
) -> Page:
    """The fork form: a checkpoint, and each agent's state there as JSON to edit."""
    validate_run_id(run_id)
    manifest = await store.read_run(run_id)
    values = values or {}
    rows = [r for r in await reading.checkpoint_rows(store, run_id) if r["forkable"]]
    asked = request.query_params.get("checkpoint") or values.get("checkpoint") or "latest"
    states: dict[str, str] = {}
    checkpoint = None
    if rows:
        checkpoint = await reading.resolve_checkpoint(store, run_id, asked)
        snapshot = await read_full_snapshot(store, run_id, checkpoint)
        data = await reading.snapshot_to_dict(store, snapshot)
        for name, agent in data.get("agents", {}).items():
            given = values.get(f"state.{name}")
            shown = json.dumps(agent.get("state"), indent=2, ensure_ascii=False, default=str)
            states[name] = given if given is not None else shown
    return Page(
        "fork.html",
        {
            "m": manifest,
            "rows": rows,
            "checkpoint": checkpoint,
            "states": states,
            "edited": {k.removeprefix("edit.") for k in values if k.startswith("edit.")},
            "new_run_id": values.get("new_run_id", ""),
            "error": error,
            "tab": "fork",
        },
    )


async def start_fork(runtime: Runtime, request: Request, run_id: str) -> Page:
    """Start the fork the form describes; an edit that does not fit is refused, nothing stored."""
    form = await read_form(request)
    store = runtime.store
    checkpoint = form.get("checkpoint", "")
    edit: dict[str, Any] = {}
    for key in form:
        if key.startswith("edit."):
            agent = key.removeprefix("edit.")
            text = form.get(f"state.{agent}", "")
            try:
                edit[agent] = json.loads(text)
            except ValueError as exc:
                error = f"the state of {agent!r} is not valid JSON: {exc}"
                return await fork_form(store, request, run_id, error=error, values=form)
    new_run_id = form.get("new_run_id", "").strip() or None
    try:
        handle = await runtime.fork(run_id, checkpoint, edit=edit, new_run_id=new_run_id)
    except (ForkEditError, ConfigurationError) as exc:
        return await fork_form(store, request, run_id, error=str(exc), values=form)
    except RuntimeNotRunningError as exc:
        raise ConfigurationError(
            "actorflow ui",
            "without --app",
            "--app module:attr, whose runtime (started by the inspector) drives the fork; "
            f"or `actorflow fork {run_id} {checkpoint} --edit AGENT=FILE` ({exc})",
        ) from exc
    manifest = await store.read_run(handle.run_id)
    return Page(
        "forked.html",
        {
            "m": manifest,
            "parent": run_id,
            "checkpoint": checkpoint,
            "edited": sorted(edit),
            "tab": "run",
        },
    )


async def compare_page(store: Store, request: Request) -> Page:
    """Two runs side by side: status, result, error, phase results, decisions, step replies."""
    a = request.query_params.get("a", "")
    b = request.query_params.get("b", "")
    everything = request.query_params.get("all") == "1"
    comparison = await compare_runs(store, validate_run_id(a), validate_run_id(b))
    sections = {
        "Run": [comparison.status, comparison.result, comparison.error],
        "Phase results": list(comparison.phases),
        "Decisions": list(comparison.decisions),
        "Step replies": list(comparison.steps),
    }
    shown = {
        title: [
            {
                "item": item,
                "a": pretty(item.a) if item.in_a else None,
                "b": pretty(item.b) if item.in_b else None,
                "changes": [(c.field, pretty(c.a), pretty(c.b)) for c in item.changes],
            }
            for item in items
            if everything or item.differs
        ]
        for title, items in sections.items()
    }
    counts = {
        title: (sum(i.differs for i in items), len(items)) for title, items in sections.items()
    }
    return Page(
        "compare.html",
        {"c": comparison, "sections": shown, "counts": counts, "all": everything, "a": a, "b": b},
    )
