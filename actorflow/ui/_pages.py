"""The inspector's read-only pages: runs, a run, a record, decisions, checkpoints, a diff.

Each page reads the store through the library's readers
(:mod:`actorflow.runtime.reading`, ``query_run``) and renders a template;
none takes a claim or writes. A failure to read becomes a page that says what
is wrong (see ``_app``), never a stack trace.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

import anyio

from actorflow.errors import CheckpointNotFoundError, LogPrunedError, StorageError
from actorflow.runtime import phase_of, reading
from actorflow.storage import (
    ClaimInspector,
    DecisionRecord,
    RunStatus,
    StepRecord,
    UnreadableLister,
    read_full_snapshot,
    validate_run_id,
)
from actorflow.ui import _format as format
from actorflow.ui._format import pretty
from actorflow.ui._listing import Listing
from actorflow.ui._timeline import build_timeline, provenance

if TYPE_CHECKING:
    from collections.abc import Callable

    from starlette.requests import Request

    from actorflow.runtime import RunQuery
    from actorflow.storage import LogRecord, RunManifest, Store

__all__ = [
    "PAGE_SIZE",
    "STEP_PAGE",
    "Page",
    "checkpoint_page",
    "checkpoints_page",
    "decisions_page",
    "diff_page",
    "health_page",
    "metrics_page",
    "queues_page",
    "record_page",
    "run_page",
    "runs_page",
    "waits_page",
]

PAGE_SIZE: Final = 50
"""Runs on one page of the runs view."""

STEP_PAGE: Final = 500
"""Log records on one page of a run's timeline."""

_AGES: Final = {"1h": 3600.0, "1d": 86400.0, "7d": 7 * 86400.0, "30d": 30 * 86400.0}


@dataclass(frozen=True)
class Page:
    """A template and what it shows."""

    template: str
    context: dict[str, Any]


def _int(request: Request, name: str, default: int) -> int:
    raw = request.query_params.get(name, "")
    return int(raw) if raw.isdigit() else default


async def runs_page(store: Store, request: Request) -> Page:
    """Every run, filtered by status, workflow, age and text in the id; paged; counts per status."""
    params = request.query_params
    wanted = [s for s in params.getlist("status") if s in RunStatus.__members__.values()]
    workflow = params.get("workflow") or None
    queue = params.get("queue") or None
    text = params.get("q", "")
    age = params.get("age", "")
    page = max(_int(request, "page", 1), 1)
    listing = _listing(request, store)
    manifests, listed_at = await listing.manifests()
    counts: dict[str, int] = {}
    workflows: set[str] = set()
    queues: set[str] = set()
    chosen = []
    now = time.time()
    for m in manifests:
        counts[str(m.status)] = counts.get(str(m.status), 0) + 1
        workflows.add(m.workflow)
        if m.queue is not None:
            queues.add(m.queue)
        if wanted and str(m.status) not in wanted:
            continue
        if workflow and m.workflow != workflow:
            continue
        if queue and m.queue != queue:
            continue
        if text and text.lower() not in m.run_id.lower():
            continue
        if age in _AGES and now - m.created > _AGES[age]:
            continue
        chosen.append(m)
    chosen.sort(key=lambda m: (m.created, m.run_id), reverse=True)  # newest first
    total = len(chosen)
    pages = max((total + PAGE_SIZE - 1) // PAGE_SIZE, 1)
    page = min(page, pages)
    # where a run stands costs reads of its own (checkpoints, log tail, claim): only the
    # runs shown pay them, so a store of many runs lists as fast as its manifests read
    shown = chosen[(page - 1) * PAGE_SIZE : page * PAGE_SIZE]
    rows = await _rows(store, shown)
    unreadable = await listing.unreadable()
    sealed = [e for e in unreadable if e.key_id and e.run_id]
    partial = request.query_params.get("partial") == "rows"
    return Page(
        "_runs_rows.html" if partial else "runs.html",
        {
            "rows": rows,
            "total": total,
            "all": len(manifests),
            "page": page,
            "pages": pages,
            "counts": sorted(counts.items()),
            "statuses": [s.value for s in RunStatus],
            "workflows": sorted(workflows),
            "queues": sorted(queues),
            "filters": {
                "status": wanted,
                "workflow": workflow or "",
                "queue": queue or "",
                "q": text,
                "age": age,
            },
            "ages": list(_AGES),
            "sealed": sealed,
            "damaged": [e for e in unreadable if not e.key_id],
            "base_query": [(k, v) for k, v in params.multi_items() if k != "page"],
            "listed_at": listed_at,
        },
    )


def _listing(request: Request, store: Store) -> Listing:
    """The app's shared listing (a fresh one for a caller that built no app state)."""
    listing = getattr(request.state, "listing", None)
    return listing if isinstance(listing, Listing) else Listing(store)


async def _rows(store: Store, manifests: list[RunManifest]) -> list[dict[str, Any]]:
    """The rows of ``manifests``, each with where its run stands."""
    return [_run_row(run) for run in await _listed(store, manifests)]


async def _listed(store: Store, manifests: list[RunManifest]) -> list[reading.ListedRun]:
    """Where each of ``manifests``' runs stands, read side by side (a few at a time)."""
    found: dict[str, reading.ListedRun] = {}
    limit = anyio.CapacityLimiter(16)

    async def one(m: RunManifest) -> None:
        async with limit:
            snapshots = await store.list_snapshots(m.run_id)
            progress = await reading.run_progress(store, m, snapshots)
        found[m.run_id] = reading.ListedRun(manifest=m, snapshots=snapshots, progress=progress)

    async with anyio.create_task_group() as tg:
        for m in manifests:
            tg.start_soon(one, m)
    return [found[m.run_id] for m in manifests]


def _run_row(run: reading.ListedRun) -> dict[str, Any]:
    m, progress = run.manifest, run.progress
    return {
        "run_id": m.run_id,
        "workflow": m.workflow,
        "status": str(m.status),
        "phase": progress.phase,
        "started": m.created,
        "activity": progress.activity,
        "owner": progress.claim.owner,
        "alive": progress.claim.alive,
        "attempts": m.attempt + 1,  # the manifest counts recoveries
        "deadline": m.deadline,
        "prompt": m.prompt,
        "parent_run": m.parent_run,
    }


async def _log(store: Store, run_id: str, start: int) -> tuple[list[tuple[int, LogRecord]], int]:
    """Records from ``start`` (or from where retention left the log) and the first position."""
    try:
        records = await store.read_log(run_id, start)
    except LogPrunedError as exc:
        start = max(start, exc.first)
        records = await store.read_log(run_id, start)
    return list(enumerate(records, start)), start


async def _claim(store: Store, manifest: RunManifest) -> tuple[str | None, bool | None]:
    if isinstance(store, ClaimInspector):
        claim = await store.read_claim(manifest.run_id)
        return claim.owner or manifest.owner, claim.alive
    return manifest.owner, await store.is_owned(manifest.run_id)


async def _family(listing: Listing, manifest: RunManifest) -> list[RunManifest]:
    """The run's child runs (started with ``ctx.run_child``) and forks of it.

    From the listing the pages share (every manifest, read again only where
    changed): a run's page never reads the whole store itself.
    """
    manifests, _ = await listing.manifests()
    return [m for m in manifests if m.parent_run == manifest.run_id or m.parent == manifest.run_id]


async def run_page(store: Store, request: Request, run_id: str) -> Page:
    """A run: header, parent and children, the timeline of one page of its log, its steps."""
    validate_run_id(run_id)
    manifest = await store.read_run(run_id)
    start = _int(request, "from", 0)
    query: RunQuery | None = None
    problem: str | None = None
    try:
        query = await reading.query_run(store, run_id)
    except StorageError as exc:
        problem = str(exc)
    records, start = await _log(store, run_id, start)
    total = start + len(records)
    window = records[:STEP_PAGE]
    snapshots = reading.live_snapshots(await store.list_snapshots(run_id))
    timeline = build_timeline(window, snapshots, run_id=run_id, attempt=manifest.attempt)
    owner, alive = await _claim(store, manifest)
    selected = request.query_params.get("step")
    chosen = None
    if selected is not None and selected.isdigit():
        chosen = await _record_context(store, manifest, int(selected))
    ended = manifest.updated if manifest.status.finished else None
    live = manifest.status in (RunStatus.RUNNING, RunStatus.INTERRUPTED)
    template = "_run_live.html" if request.query_params.get("partial") == "live" else "run.html"
    return Page(
        template,
        {
            "m": manifest,
            "q": query,
            "problem": problem,
            "owner": owner,
            "alive": alive,
            "result": pretty(reading.decode_plain(manifest.result))
            if manifest.status is RunStatus.COMPLETED
            else None,
            "elapsed": (ended or time.time()) - manifest.created if manifest.created else None,
            "family": await _family(_listing(request, store), manifest),
            "timeline": timeline,
            "steps": [(p, r, phase_of(r.step_id)) for p, r in window if isinstance(r, StepRecord)],
            "start": start,
            "shown": len(window),
            "total": total,
            "page_size": STEP_PAGE,
            "chosen": chosen,
            "live": live,
            "tab": "run",
        },
    )


async def _record_context(store: Store, manifest: RunManifest, position: int) -> dict[str, Any]:
    run_id = manifest.run_id
    records, _ = await _log(store, run_id, position)
    if not records or records[0][0] != position:
        raise StorageError(
            "read record",
            f"run {run_id} has no log record at position {position} (pruned, or not written)",
        )
    record = records[0][1]
    data = reading.record_to_dict(record)
    timing = None
    if isinstance(record, StepRecord) and record.issued and record.time:
        timing = record.time - record.issued
    state = None
    if isinstance(record, StepRecord) and record.state is not None:
        ref = record.state
        encoded = ref.data if ref.data is not None else await store.get_blob(run_id, ref.blob)
        state = pretty(reading.decode_plain(encoded))
    message: str | None = None
    message_type = None
    if isinstance(record, StepRecord) and record.message is not None:
        message_type = record.message.type
        try:
            message = pretty(await reading.read_message(store, run_id, record))
        except StorageError as exc:  # its blob pruned or unreadable: the rest still shows
            message = f"(cannot be read: {exc})"
    key = None
    if isinstance(record, StepRecord) and record.kind in ("ask", "send"):
        key = f"{run_id}/{record.step_id}"  # what the agent's handler reads as current_step().key
    return {
        "position": position,
        "record": record,
        "key": key,
        "state": state,
        "tag": data.get("tag", ""),
        "phase": phase_of(getattr(record, "step_id", None) or ""),
        "fields": pretty(data),
        "result": pretty(data.get("result")) if "result" in data else None,
        "took": timing,
        "message": message,
        "message_type": message_type,
        "provenance": provenance(record.run_attempt, manifest.attempt)
        if isinstance(record, StepRecord)
        else [],
    }


async def record_page(store: Store, request: Request, run_id: str, position: int) -> Page:
    """One log record, its values decoded (``partial``: just the panel, for the timeline)."""
    validate_run_id(run_id)
    manifest = await store.read_run(run_id)
    chosen = await _record_context(store, manifest, position)
    partial = request.query_params.get("partial") == "1"
    return Page(
        "record_panel.html" if partial else "record.html",
        {"m": manifest, "chosen": chosen, "tab": "run"},
    )


async def decisions_page(store: Store, request: Request, run_id: str) -> Page:
    """The run's decisions: rationale, confidence, alternatives, linked to step and phase."""
    validate_run_id(run_id)
    manifest = await store.read_run(run_id)
    records, start = await _log(store, run_id, 0)
    decisions = [(p, r, phase_of(r.step_id)) for p, r in records if isinstance(r, DecisionRecord)]
    steps = {r.step_id: p for p, r in records if isinstance(r, StepRecord)}
    earlier: list[DecisionRecord] = []
    if start > 0:  # pruned: what the newest checkpoint holds of the decisions before
        query = await reading.query_run(store, run_id)
        logged = {(r.step_id, r.type) for _, r, _ in decisions}
        earlier = [d for d in query.decisions if (d.step_id, d.type) not in logged]
    return Page(
        "decisions.html",
        {
            "m": manifest,
            "decisions": decisions,
            "earlier": earlier,
            "steps": steps,
            "tab": "decisions",
        },
    )


async def checkpoints_page(store: Store, request: Request, run_id: str) -> Page:
    """The run's checkpoints (verified), with a form to diff two."""
    validate_run_id(run_id)
    manifest = await store.read_run(run_id)
    rows = await reading.checkpoint_rows(store, run_id)
    return Page("checkpoints.html", {"m": manifest, "rows": rows, "tab": "checkpoints"})


async def checkpoint_page(store: Store, request: Request, run_id: str, checkpoint: str) -> Page:
    """One checkpoint: every agent's state decoded, its phases, decisions and metrics."""
    validate_run_id(run_id)
    manifest = await store.read_run(run_id)
    snapshot_id = await reading.resolve_checkpoint(store, run_id, checkpoint)
    snapshot = await read_full_snapshot(store, run_id, snapshot_id)
    data = await reading.snapshot_to_dict(store, snapshot)
    agent = request.query_params.get("agent")
    agents = {name: pretty(a) for name, a in data.get("agents", {}).items()}
    if agent is not None and agent not in agents:
        raise CheckpointNotFoundError(run_id, f"{checkpoint} (it has no agent {agent!r})")
    return Page(
        "checkpoint.html",
        {
            "m": manifest,
            "snapshot": snapshot,
            "agents": agents,
            "agent": agent,
            "phases": pretty(data.get("phases", {})),
            "metrics": pretty(data.get("metrics", {})),
            "decisions": pretty(data.get("decisions", [])),
            "tab": "checkpoints",
        },
    )


async def diff_page(store: Store, request: Request, run_id: str) -> Page:
    """What changed between checkpoints ``a`` and ``b`` (default: the newest)."""
    validate_run_id(run_id)
    manifest = await store.read_run(run_id)
    a = request.query_params.get("a", "latest~1")
    b = request.query_params.get("b", "latest")
    first_id = await reading.resolve_checkpoint(store, run_id, a)
    second_id = await reading.resolve_checkpoint(store, run_id, b)
    first = await read_full_snapshot(store, run_id, first_id)
    second = await read_full_snapshot(store, run_id, second_id)
    diff = await reading.diff_snapshots(store, first, second)
    agents = {
        name: {
            "change": change.get("change"),
            "attrs": {k: v for k, v in change.items() if k not in ("change", "state")},
            "fields": {k: (pretty(v[0]), pretty(v[1])) for k, v in change.get("state", {}).items()},
        }
        for name, change in diff["agents"].items()
    }
    return Page(
        "diff.html",
        {
            "m": manifest,
            "diff": diff,
            "agents": agents,
            "decisions": diff["decisions_added"],
            "metrics": diff["metrics"],
            "tab": "checkpoints",
        },
    )


async def waits_page(store: Store, request: Request) -> Page:
    """Every pending wait across the runs that have not finished: prompt, type, deadline."""
    manifests, _ = await _listing(request, store).manifests()
    waits = []
    problems = []
    for m in manifests:
        if m.status.finished:
            continue
        try:
            query = await reading.query_run(store, m.run_id)
        except StorageError as exc:
            problems.append((m.run_id, str(exc)))
            continue
        waits += [(m, w) for w in query.waits]
    return Page("waits.html", {"waits": waits, "problems": problems})


@dataclass
class QueueRow:
    """One queue: its stats (``count_queues``) and its runs of every status."""

    stats: reading.QueueStats
    statuses: dict[str, int]  # runs of the queue per status, finished ones too


async def queues_page(store: Store, request: Request) -> Page:
    """Each queue: its runs by status, queued ones by priority, running against the cap.

    Caps are declared by the runtimes that take runs from the queues
    (``Runtime(queues=...)``): shown when the inspector has the app's runtime.
    """
    manifests, listed_at = await _listing(request, store).manifests()
    declared = tuple(getattr(request.state, "queues", ()))
    stats = reading.count_queues(manifests, declared, now=listed_at)
    statuses: dict[str, dict[str, int]] = {name: {} for name in stats}
    for m in manifests:
        if m.queue is not None:
            counts = statuses.setdefault(m.queue, {})
            counts[str(m.status)] = counts.get(str(m.status), 0) + 1
    names = sorted(set(stats) | set(statuses))
    return Page(
        "queues.html",
        {
            "queues": [
                QueueRow(stats=stats.get(n) or reading.QueueStats(name=n), statuses=statuses[n])
                for n in names
            ],
            "statuses": [s.value for s in RunStatus],
            "declared": bool(declared),
        },
    )


async def health_page(store: Store, request: Request) -> Page:
    """The store's health: unreadable entries, owners and their claims, orphaned runs.

    With ``?check=1`` every checksum is verified too (``actorflow validate``).
    """
    manifests = await store.list_runs()
    unreadable = await store.list_unreadable() if isinstance(store, UnreadableLister) else []
    sealed = [e for e in unreadable if e.key_id and e.run_id]
    # who holds a run matters while it has not finished: only those runs' claims are read
    unfinished = [m for m in manifests if not m.status.finished]
    listed = await _listed(store, unfinished)
    owners: dict[str, list[reading.ListedRun]] = {}
    orphans = []
    for run in listed:
        claim = run.progress.claim
        if claim.owner:
            owners.setdefault(claim.owner, []).append(run)
        if run.manifest.status in (RunStatus.RUNNING, RunStatus.INTERRUPTED) and not claim.alive:
            orphans.append(run)
    report = None
    if request.query_params.get("check") == "1":
        damaged = [e for e in unreadable if not (e.key_id and e.run_id)]
        report = await reading.validate_store(
            store,
            [m.run_id for m in manifests],
            damaged,
            [e.run_id for e in sealed if e.run_id],
        )
    return Page(
        "health.html",
        {
            "runs": len(manifests),
            "sealed": sealed,
            "unreadable": unreadable,
            "owners": sorted(owners.items()),
            "orphans": orphans,
            "report": report,
        },
    )


@dataclass(frozen=True)
class Bar:
    """One bar of a chart: its label, value, and length in percent of the largest."""

    label: str
    value: float
    text: str
    pct: float


def _bars(values: dict[str, float], text: Callable[[float], str]) -> list[Bar]:
    top = max((abs(v) for v in values.values()), default=0.0) or 1.0
    return [Bar(k, v, text(v), abs(v) / top * 100.0) for k, v in values.items()]


async def metrics_page(store: Store, request: Request, run_id: str) -> Page:
    """Steps and time in steps per agent and per phase; the run's metrics; checkpoint sizes."""
    validate_run_id(run_id)
    manifest = await store.read_run(run_id)
    records, start = await _log(store, run_id, 0)
    per_agent: dict[str, list[float]] = {}
    per_phase: dict[str, list[float]] = {}
    for _, record in records:
        if not isinstance(record, StepRecord):
            continue
        took = record.time - record.issued if 0 < record.issued <= record.time else 0.0
        agent = (
            record.target if record.kind in ("ask", "send") and record.target else "orchestrator"
        )
        for table, key in ((per_agent, agent), (per_phase, phase_of(record.step_id) or "-")):
            count_time = table.setdefault(key, [0.0, 0.0])
            count_time[0] += 1
            count_time[1] += took
    query: RunQuery | None = None
    problem = None
    try:
        query = await reading.query_run(store, run_id)
    except StorageError as exc:
        problem = str(exc)
    snapshots = reading.live_snapshots(await store.list_snapshots(run_id))
    charts = {
        "Steps per agent": _bars({k: v[0] for k, v in per_agent.items()}, lambda v: f"{v:.0f}"),
        "Time in steps per agent": _bars({k: v[1] for k, v in per_agent.items()}, format.duration),
        "Steps per phase": _bars({k: v[0] for k, v in per_phase.items()}, lambda v: f"{v:.0f}"),
        "Time in steps per phase": _bars({k: v[1] for k, v in per_phase.items()}, format.duration),
    }
    user = {k: v for k, v in (query.metrics if query else {}).items()}
    sizes = _bars(
        {f"{s.snapshot_id} @{s.position}": float(s.stored_size) for s in snapshots},
        lambda v: format.size(int(v)),
    )
    return Page(
        "metrics.html",
        {
            "m": manifest,
            "charts": charts,
            "user": _bars(user, lambda v: f"{v:g}"),
            "sizes": sizes,
            "pruned": start,
            "problem": problem,
            "tab": "metrics",
        },
    )
