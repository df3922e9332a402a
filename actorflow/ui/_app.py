"""The inspector as an ASGI app: routes, templates, access rules, error pages.

:func:`create_app` builds it over a store (an object, or a location it opens
itself). Every response is rendered on the server from Jinja templates with
autoescaping on: text a run stored is shown, never interpreted.
"""

from __future__ import annotations

import contextlib
import functools
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import anyio
import jinja2
import structlog
from starlette.applications import Starlette
from starlette.responses import HTMLResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from actorflow.errors import (
    ActorflowError,
    CheckpointNotFoundError,
    CorruptedDataError,
    EncryptionKeyError,
    InvalidNameError,
    RunNotFoundError,
)
from actorflow.runtime import Runtime
from actorflow.storage import open_store
from actorflow.ui import _actions, _fork, _format, _live, _pages
from actorflow.ui._actions import read_form
from actorflow.ui._listing import Listing
from actorflow.ui._security import LOOPBACK_NAMES, Access, HostCheck, new_token

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Awaitable, Callable, Iterable

    from anyio.abc import TaskGroup
    from starlette.requests import Request

    from actorflow.storage import Store

__all__ = ["create_app"]

_HERE: Final = Path(__file__).parent
_log = structlog.get_logger("actorflow.ui")


def _environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(_HERE / "templates"),
        autoescape=True,  # every template, whatever its name: stored text is never markup
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(
        when=_format.when,
        when_full=_format.when_full,
        duration=_format.duration,
        size=_format.size,
        brief=_format.brief,
        line=_format.line,
        pretty=_format.pretty,
    )
    return env


def _status_of(error: BaseException) -> tuple[int, str]:
    match error:
        case InvalidNameError():
            return 400, "Not a valid name"
        case RunNotFoundError() | CheckpointNotFoundError():
            return 404, "Not found"
        case EncryptionKeyError():
            return 403, "Encrypted"
        case CorruptedDataError():
            return 500, "Damaged data"
        case _:
            return 500, "Cannot read this"


class _Inspector:
    """The app's state: the store, the access rules, the templates."""

    def __init__(
        self,
        store: Store | None,
        location: str | None,
        access: Access,
        runtime: Runtime | None = None,
    ) -> None:
        self._store = store
        self._location = location
        self._runtime = runtime
        self._listing: Listing | None = None
        self.tasks: TaskGroup | None = None
        self.access = access
        self.env = _environment()

    @property
    def runtime(self) -> Runtime:
        """The runtime whose public calls the actions make: not started, it drives nothing."""
        if self._runtime is None:
            self._runtime = Runtime(store=self.store)
        return self._runtime

    @property
    def store(self) -> Store:
        if self._store is None:
            assert self._location is not None
            self._store = open_store(self._location)
        return self._store

    @property
    def listing(self) -> Listing:
        """The runs listed for the pages, shared by them for a few seconds."""
        if self._listing is None:
            self._listing = Listing(self.store)
        return self._listing

    async def aclose(self) -> None:
        """Close the store if this app opened it."""
        if self._location is not None and self._store is not None:
            await self._store.aclose()
            self._store = None

    def render(
        self, request: Request, template: str, context: dict[str, Any], code: int = 200
    ) -> HTMLResponse:
        page = self.env.get_template(template).render(
            **context,
            read_only=self.access.read_only,
            csrf=self.access.csrf(),
            path=request.url.path,
        )
        # a name read from a damaged disk may hold undecodable bytes (surrogates): shown escaped
        return HTMLResponse(page.encode("utf-8", "backslashreplace"), status_code=code)

    def error_page(self, request: Request, error: BaseException) -> HTMLResponse:
        if isinstance(error, ActorflowError):
            code, title = _status_of(error)
            message = str(error)
        else:  # a defect: say what, never the traceback (the log has it)
            _log.error("ui_page_failed", path=request.url.path, exc_info=error)
            code, title = 500, "The inspector failed"
            message = f"{type(error).__name__}: {error}"
        if isinstance(error, EncryptionKeyError):
            message += (
                " — start `actorflow ui` with the store's key (--key-file FILE, "
                "ACTORFLOW_KEYS or ACTORFLOW_KEY_FILE) to read it"
            )
        context = {"title": title, "message": message, "code": code}
        return self.render(request, "error.html", context, code)

    def page(
        self, fn: Callable[..., Awaitable[_pages.Page]], *names: str
    ) -> Callable[[Request], Awaitable[Response]]:
        async def endpoint(request: Request) -> Response:
            gated = self.access.gate(request)
            if gated is not None:
                return gated
            args = [request.path_params[n] for n in names]
            request.state.listing = self.listing
            # the queues the app's runtime declares (their caps), if the app has one
            request.state.queues = self._runtime.queues if self._runtime is not None else ()
            try:
                page = await fn(self.store, request, *args)
            except Exception as exc:  # every failure is a page saying what is wrong
                return self.error_page(request, exc)
            return self.render(request, page.template, page.context)

        return endpoint

    def live(
        self, fn: Callable[..., Awaitable[Response]], *names: str
    ) -> Callable[[Request], Awaitable[Response]]:
        async def endpoint(request: Request) -> Response:
            gated = self.access.gate(request)
            if gated is not None:
                return gated
            args = [request.path_params[n] for n in names]
            try:
                return await fn(self.store, request, *args)
            except Exception as exc:
                return self.error_page(request, exc)

        return endpoint

    def action(
        self, fn: Callable[..., Awaitable[_pages.Page]], *names: str
    ) -> Callable[[Request], Awaitable[Response]]:
        async def endpoint(request: Request) -> Response:
            try:
                form = await read_form(request)
            except Exception as exc:  # too large, say: a page saying so
                return self.error_page(request, exc)
            refused = await self.access.check_action(request, form.get("csrf"))
            if refused is not None:
                return refused
            args = [request.path_params[n] for n in names]
            try:
                page = await fn(self.runtime, request, *args)
            except Exception as exc:
                return self.error_page(request, exc)
            return self.render(request, page.template, page.context)

        return endpoint


def create_app(
    store: Store | str | os.PathLike[str],
    *,
    read_only: bool = False,
    token: str | None = None,
    allowed_hosts: Iterable[str] = (),
    runtime: Runtime | None = None,
) -> Starlette:
    """The inspector as an ASGI app, to serve or to mount in your own server.

    Args:
        store: the store to inspect, or its location (a folder or
            ``s3://bucket/prefix``), opened on first use and closed with the app.
        read_only: no actions (answer, update, cancel, fork): pages only.
        token: the launch token pages and actions need (in the URL once,
            ``/?token=...``, then in a cookie). None: a fresh one, except in
            read-only mode, where pages then need none. The app's is
            ``app.state.token``.
        allowed_hosts: names the Host header may carry besides the loopback ones.
        runtime: whose ``signal``, ``update``, ``cancel`` and ``fork`` the
            actions call: your app's, so that its message and workflow types
            are known. A fork needs it running (``async with runtime``); the
            inspector never starts it. None: a plain one over ``store``,
            which cannot fork.
    """
    if token is None and not read_only:
        token = new_token()
    access = Access(token, read_only=read_only)
    if isinstance(store, str | os.PathLike):
        inspector = _Inspector(None, os.fspath(store), access, runtime)
    else:
        inspector = _Inspector(store, None, access, runtime)
    p, act = inspector.page, inspector.action
    routes = [
        Route("/", p(_pages.runs_page)),
        Route("/waits", p(_pages.waits_page)),
        Route("/queues", p(_pages.queues_page)),
        Route("/health", p(_pages.health_page)),
        Route("/runs/{run_id}", p(_pages.run_page, "run_id")),
        Route("/runs/{run_id}/records/{position:int}", p(_pages.record_page, "run_id", "position")),
        Route("/runs/{run_id}/decisions", p(_pages.decisions_page, "run_id")),
        Route("/runs/{run_id}/checkpoints", p(_pages.checkpoints_page, "run_id")),
        Route(
            "/runs/{run_id}/checkpoints/{checkpoint}",
            p(_pages.checkpoint_page, "run_id", "checkpoint"),
        ),
        Route("/runs/{run_id}/diff", p(_pages.diff_page, "run_id")),
        Route("/runs/{run_id}/metrics", p(_pages.metrics_page, "run_id")),
        Route("/runs/{run_id}/answer", p(_actions.answer_form, "run_id")),
        Route("/runs/{run_id}/answer", act(_actions.send_answer, "run_id"), methods=["POST"]),
        Route("/runs/{run_id}/update", act(_actions.send_update, "run_id"), methods=["POST"]),
        Route("/runs/{run_id}/cancel", act(_actions.send_cancel, "run_id"), methods=["POST"]),
        Route("/runs/{run_id}/events", inspector.live(_live.events, "run_id")),
        Route(
            "/runs/{run_id}/continue",
            act(functools.partial(_actions.continue_run, inspector), "run_id"),
            methods=["POST"],
        ),
        Route("/runs/{run_id}/fork", p(_fork.fork_form, "run_id")),
        Route("/runs/{run_id}/fork", act(_fork.start_fork, "run_id"), methods=["POST"]),
        Route("/compare", p(_fork.compare_page)),
        Mount("/static", StaticFiles(directory=_HERE / "static"), name="static"),
    ]

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        try:
            async with anyio.create_task_group() as tasks:
                inspector.tasks = tasks  # runs continued here (``continue_run``)
                yield
                tasks.cancel_scope.cancel()
        finally:
            inspector.tasks = None
            await inspector.aclose()

    async def not_found(request: Request, exc: Exception) -> Response:
        context = {"title": "Not found", "message": f"no page at {request.url.path}", "code": 404}
        return inspector.render(request, "error.html", context, 404)

    app = Starlette(routes=routes, lifespan=lifespan, exception_handlers={404: not_found})
    app.state.token = token
    app.state.read_only = read_only
    app.add_middleware(HostCheck, allowed=LOOPBACK_NAMES | frozenset(allowed_hosts))
    return app
