"""``actorflow ui``: the inspector, a local web app over a store (the ``ui`` extra).

It binds 127.0.0.1 unless told otherwise, and prints one line, the URL with
this launch's token. Another address is refused unless the inspector is
read-only or its token comes from a file (``--token-file``): a store's pages
and actions are not opened to a network on a token printed to a terminal.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Annotated, Final, NoReturn

import typer

from actorflow.cli._app import (
    EXIT_CODES,
    AppOpt,
    AppStoreOpt,
    BadValueError,
    DebugOpt,
    KeyFileOpt,
    chosen_store,
    command,
    reader_store,
    run_command,
)
from actorflow.cli._loading import load_app, open_existing_store, require_existing
from actorflow.cli._messages import read_input
from actorflow.cli._program import given
from actorflow.cli._render import err, esc
from actorflow.errors import StorageError

if TYPE_CHECKING:
    from actorflow.runtime import Runtime
    from actorflow.storage import Store

__all__: list[str] = []

_EXTRA: Final = "pip install 'actorflow[ui]'"


@command("ui")
def ui_command(
    store: AppStoreOpt = None,
    app_spec: AppOpt = None,
    host: Annotated[
        str,
        typer.Option(
            "--host",
            help="Address to listen on (another than this machine's "
            "needs --read-only or --token-file).",
        ),
    ] = "127.0.0.1",
    port: Annotated[
        int, typer.Option("--port", min=0, max=65535, help="Port to listen on (0: a free one).")
    ] = 8765,
    read_only: Annotated[
        bool,
        typer.Option("--read-only", help="Pages only: no answering, updating, cancelling."),
    ] = False,
    token_file: Annotated[
        str | None,
        typer.Option(
            "--token-file",
            metavar="FILE",
            help="Take the launch token from FILE instead of a fresh one.",
        ),
    ] = None,
    loop: Annotated[
        str, typer.Option("--loop", help="Event loop: asyncio (uvicorn) or trio (hypercorn).")
    ] = "asyncio",
    key_file: KeyFileOpt = None,
    debug: DebugOpt = False,
) -> None:
    """Start the inspector, a web page of the store's runs, and print its URL.

    Views: runs, a run's timeline and steps, decisions, checkpoints and their
    diffs. GET pages need the token in the printed URL once (a cookie keeps
    it); with --read-only they need none.
    """
    try:
        import actorflow.ui as ui
        from actorflow.ui import bind, is_loopback
    except ImportError as exc:
        err().print(
            f"[bold red]error:[/] `actorflow ui` needs the ui extra ({esc(exc.name or exc)} "
            f"is missing): {esc(_EXTRA)}"
        )
        raise typer.Exit(EXIT_CODES["error"]) from None
    if loop not in ("asyncio", "trio"):
        _fail(BadValueError("--loop", loop, "asyncio or trio"))
    if not is_loopback(host) and not read_only and token_file is None:
        _fail(
            BadValueError(
                "--host",
                host,
                "127.0.0.1 or localhost; another address only with --read-only, or with "
                "--token-file FILE holding a secret token (anyone who can reach it could "
                "otherwise read every run and act on them)",
            )
        )
    token = _read_token(token_file) if token_file is not None else None
    try:
        sock = bind(host, port)
    except OSError as exc:
        _fail(BadValueError("--port", port, f"a port free on {host} ({exc.strerror or exc})"))
    if app_spec is not None:
        chosen = chosen_store(store)
        given(app=app_spec, store=chosen)
    else:
        location = reader_store(store)

    async def serve(s: Store, runtime: Runtime | None) -> None:
        app = ui.create_app(
            s,
            read_only=read_only,
            token=token,
            allowed_hosts=() if is_loopback(host) else (host,),
            runtime=runtime,
        )
        shown = "127.0.0.1" if host in ("0.0.0.0", "") else host
        shown = f"[{shown}]" if ":" in shown and not shown.startswith("[") else shown
        query = f"/?token={app.state.token}" if app.state.token else "/"
        print(f"actorflow ui: http://{shown}:{sock.getsockname()[1]}{query}", flush=True)
        await ui.serve(app, sock)

    async def body() -> None:
        try:
            if app_spec is None:
                s = open_existing_store(location, key_file)
                try:
                    await require_existing(s)
                    await serve(s, None)
                finally:
                    await s.aclose()
                return
            # the app's store unless --store (or ACTORFLOW_STORE) names another; its runtime
            # runs, to drive the forks started from the pages (it adopts nothing)
            runtime = load_app(app_spec, chosen or os.environ.get("ACTORFLOW_STORE"))
            try:
                await require_existing(runtime.store)  # as without --app: nothing created
            except StorageError:
                await runtime.store.aclose()
                raise
            async with runtime:
                await serve(runtime.store, None if read_only else runtime)
        finally:
            sock.close()

    run_command(body, debug=debug, backend=loop)


def _read_token(path: str) -> str:
    try:
        token = read_input("--token-file", path).decode("utf-8", errors="replace").strip()
    except BadValueError as exc:
        _fail(exc)
    if len(token) < 16:
        _fail(BadValueError("--token-file", path, "a token of 16 characters or more"))
    return token


def _fail(error: BadValueError) -> NoReturn:
    err().print(f"[bold red]error:[/] {esc(error)}")
    raise typer.Exit(EXIT_CODES["usage"])
