"""The inspector's actions: answer a wait, send an update, cancel a run.

Each goes through the public ``Runtime.signal``, ``update`` and ``cancel`` of a
runtime that is not started, as ``actorflow signal``, ``update`` and
``cancel`` do: the inspector never drives a run. An answer is a signal into
the run's durable inbox: a live run takes it at once; a paused run goes on
when a process recovers it (``actorflow recover``, or a worker). Every action
is a POST that needs the launch token's cookie and the form's CSRF token.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final, Protocol
from urllib.parse import parse_qsl

import anyio
import msgspec
import structlog

from actorflow.errors import ActorflowError, ConfigurationError, WaitNotPendingError
from actorflow.runtime import reading
from actorflow.storage import validate_run_id
from actorflow.ui._forms import fields_of, value_of
from actorflow.ui._pages import Page

if TYPE_CHECKING:
    from anyio.abc import TaskGroup
    from starlette.requests import Request

    from actorflow.runtime import PendingWait, Runtime
    from actorflow.storage import Store

__all__ = [
    "CONTINUE_WAIT",
    "UPDATE_WAIT",
    "TaskHost",
    "answer_form",
    "continue_run",
    "read_form",
    "send_answer",
    "send_cancel",
    "send_update",
]

UPDATE_WAIT: Final = 10.0
"""Seconds an update waits for the run's reply before the page says it was sent."""

_MAX_FORM: Final = 1_000_000
_log = structlog.get_logger("actorflow.ui")

CONTINUE_WAIT: Final = 10.0
"""Seconds the page waits for a run continued here to start before it answers."""


class TaskHost(Protocol):
    """Where runs continued by the inspector run: its server's task group, while it serves."""

    tasks: TaskGroup | None


async def read_form(request: Request) -> dict[str, str]:
    """A urlencoded POST body as a mapping (the last value of a repeated name wins)."""
    body = await request.body()
    if len(body) > _MAX_FORM:
        raise ConfigurationError("the form", f"{len(body)} bytes", f"{_MAX_FORM} bytes at most")
    return dict(parse_qsl(body.decode("utf-8", "replace"), keep_blank_values=True))


async def _wait(store: Store, run_id: str, step_id: str) -> PendingWait:
    query = await reading.query_run(store, run_id)
    for wait in query.waits:
        if wait.step_id == step_id:
            return wait
    raise WaitNotPendingError(run_id, step_id)


def _message_type(name: str) -> tuple[type[Any] | None, str | None]:
    try:
        return reading.find_message_type(name), None
    except ActorflowError as exc:
        return None, str(exc)


async def answer_form(
    store: Store,
    request: Request,
    run_id: str,
    *,
    error: str | None = None,
    values: dict[str, str] | None = None,
) -> Page:
    """The form answering the wait at ``?step=`` of run ``run_id``, built from its type."""
    validate_run_id(run_id)
    manifest = await store.read_run(run_id)
    step = request.query_params.get("step") or (values or {}).get("step", "")
    wait = await _wait(store, run_id, step)
    cls, missing = _message_type(wait.type)
    return Page(
        "answer.html",
        {
            "m": manifest,
            "wait": wait,
            "fields": fields_of(cls) if cls is not None else [],
            "missing": missing,
            "schema": msgspec.json.encode(msgspec.json.schema(cls)).decode() if cls else "",
            "error": error,
            "values": values or {},
            "tab": "run",
        },
    )


async def send_answer(runtime: Runtime, request: Request, run_id: str) -> Page:
    """Validate the answer against the wait's type and send it as a signal."""
    form = await read_form(request)
    store = runtime.store
    wait = await _wait(store, validate_run_id(run_id), form.get("step", ""))
    cls, missing = _message_type(wait.type)
    if cls is None:
        return await answer_form(store, request, run_id, error=missing, values=form)
    try:
        message = value_of(cls, form)
    except ConfigurationError as exc:
        return await answer_form(store, request, run_id, error=str(exc), values=form)
    entry = await runtime.signal(run_id, message)
    manifest = await store.read_run(run_id)
    return Page(
        "done.html",
        {
            "m": manifest,
            "what": f"Sent a {wait.type} to the wait at step {wait.step_id}",
            "detail": f"inbox entry {entry.seq}, id {entry.entry_id}",
            "paused": manifest.status.value == "paused",
            "can_continue": runtime.running,
            "tab": "run",
        },
    )


async def continue_run(host: TaskHost, runtime: Runtime, request: Request, run_id: str) -> Page:
    """Continue a paused run in the inspector's process, now that its wait can resolve.

    ``runtime.recover(run_id)`` in the server's task group, with the app's
    runtime (``actorflow ui --app``); the page answers once the run has
    started again (or ``recover`` found nothing to do).
    """
    validate_run_id(run_id)
    if not runtime.running or host.tasks is None:
        raise ConfigurationError(
            "actorflow ui",
            "without --app",
            "--app module:attr, whose runtime (started by the inspector) runs the run; "
            f"or `actorflow recover {run_id} --app ...`, or a worker",
        )
    started = anyio.Event()

    async def recover() -> None:
        try:
            await runtime.recover(run_id, on_start=lambda handle: started.set())
        except Exception as exc:  # stored with the run as it ends; the server goes on
            _log.warning("ui_continue_failed", run_id=run_id, error=f"{type(exc).__name__}: {exc}")
        finally:
            started.set()

    host.tasks.start_soon(recover)
    with anyio.move_on_after(CONTINUE_WAIT):
        await started.wait()
    manifest = await runtime.store.read_run(run_id)
    return Page(
        "done.html",
        {
            "m": manifest,
            "what": "Continuing the run in this inspector's process",
            "detail": f"it is {manifest.status} now",
            "paused": False,
            "tab": "run",
        },
    )


async def send_update(runtime: Runtime, request: Request, run_id: str) -> Page:
    """Send an update (its type by name, its value as JSON) and wait a while for the reply."""
    form = await read_form(request)
    manifest = await runtime.store.read_run(validate_run_id(run_id))
    name = form.get("type", "")
    cls, missing = _message_type(name)
    reply: Any = None
    answered = False
    if cls is None:
        raise ConfigurationError("type", name, missing or "a message type the app defines")
    text = form.get("json", "")
    try:
        message = msgspec.json.decode(text.encode() or b"null", type=cls)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise ConfigurationError("the update", text, f"JSON for a {name} ({exc})") from None
    with anyio.move_on_after(UPDATE_WAIT):
        reply = await runtime.update(run_id, message)
        answered = True
    return Page(
        "done.html",
        {
            "m": manifest,
            "what": f"Sent the update {name}",
            "detail": "the run replied:"
            if answered
            else ("no reply yet: the run answers when it goes on (the update stays in its inbox)"),
            "reply": reading.plain(reply) if answered else None,
            "answered": answered,
            "paused": False,
            "tab": "run",
        },
    )


async def send_cancel(runtime: Runtime, request: Request, run_id: str) -> Page:
    """Cancel the run with the reason given."""
    form = await read_form(request)
    reason = form.get("reason", "").strip() or None
    before = await runtime.store.read_run(validate_run_id(run_id))
    if not before.status.finished:
        await runtime.cancel(run_id, reason=reason)
    after = await runtime.store.read_run(run_id)
    if before.status.finished:
        what = f"The run had ended already ({before.status}): left as it is"
    elif after.status.value == "cancelled":
        what = "Cancelled the run"
    else:
        what = "Cancel requested from the run's owner, which ends it when it takes the request"
    return Page(
        "done.html",
        {
            "m": after,
            "what": what,
            "detail": f"reason: {reason or '-'}",
            "paused": False,
            "tab": "run",
        },
    )
