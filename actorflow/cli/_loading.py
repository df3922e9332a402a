"""Where commands get their store and runtime: opening a store, loading ``--app module:attr``."""

from __future__ import annotations

import importlib
import inspect
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, runtime_checkable

from actorflow.cli._app import DEFAULT_STORE, BadValueError, chosen_store, run_command
from actorflow.cli._program import given
from actorflow.errors import (
    ConfigurationError,
    StorageError,
    StoreReadOnlyError,
    StoreUnavailableError,
)
from actorflow.runtime import Runtime
from actorflow.storage import (
    Codec,
    FileStore,
    SqliteStore,
    Store,
    UnreadableLister,
    open_store,
)

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Mapping

__all__ = [
    "add_default_app",
    "check_writable",
    "load_app",
    "open_existing_store",
    "require_existing",
    "require_keys",
    "with_app",
    "with_store",
]

T = TypeVar("T")

_default_apps: list[Callable[[], object]] = []


def add_default_app(load: Callable[[], object]) -> None:
    """Have :func:`load_app` call ``load`` first, with or without ``--app``.

    ``load`` imports a module of workflows, which registers its workflow and
    agent classes, so that every command finds them without ``--app``. The
    ``demo`` command adds the demo's: ``recover`` finishes a killed demo.
    """
    _default_apps.append(load)


def _require_folder(path: str, *, create: bool) -> None:
    """Raise unless ``path`` is a store's folder, or (``create``) nothing yet.

    A command must not create an empty store where the user mistyped a path,
    nor take a file for one.
    """
    folder = Path(path)
    if folder.is_dir() or (create and not folder.exists()):
        return
    what = f"{path} is a file, not an actorflow store" if folder.exists() else ""
    raise StoreUnavailableError(
        "open store",
        f"{what or f'no actorflow store at {path}'}; name an existing store with --store "
        "or ACTORFLOW_STORE (`actorflow demo` makes one)",
    )


def _require_file(path: str, *, create: bool) -> None:
    """Raise unless ``path`` is a file (an SQLite store's), or (``create``) nothing yet.

    A command must not create an empty store where the user mistyped a path.
    """
    file = Path(path)
    if file.is_file() or (create and not file.exists()):
        return
    what = f"{path} is a folder, not an SQLite store" if file.exists() else ""
    raise StoreUnavailableError(
        "open store",
        f"{what or f'no actorflow store at {path}'}; name an existing store with --store "
        "or ACTORFLOW_STORE",
    )


def open_existing_store(spec: str, key_file: str | None) -> Store:
    """The store at ``spec`` (with the keys ``key_file`` lists), which must exist.

    Raises:
        StoreUnavailableError: ``spec`` is a folder that does not exist, or a file.
        BadValueError: the key file holds something unusable.
    """
    if "://" not in spec:
        _require_folder(spec, create=False)
    store = _open(spec, key_file)
    if isinstance(store, SqliteStore):
        _require_file(store.path, create=False)
    return store


@runtime_checkable
class _Probed(Protocol):
    """A store that says whether it is there without making it (a database's schema)."""

    @property
    def location(self) -> str: ...

    async def exists(self) -> bool: ...


async def require_existing(store: Store) -> None:
    """Raise unless ``store`` is there already: its folder, its file, its PostgreSQL schema.

    A command must not create an empty store where the user mistyped a path
    or a schema.

    Raises:
        StoreUnavailableError: no folder (a file store), no file (SQLite), or
            the database holds no store there.
    """
    if isinstance(store, FileStore):
        _require_folder(store.path, create=False)
    elif isinstance(store, SqliteStore):
        _require_file(store.path, create=False)
    elif isinstance(store, _Probed) and not await store.exists():
        raise StoreUnavailableError(
            "open store",
            f"no actorflow store at {store.location}; name an existing store with --store "
            "or ACTORFLOW_STORE (the first run started there makes it)",
        )


def _open(spec: str, key_file: str | None) -> Store:
    if key_file is None:
        return open_store(spec)  # keys from ACTORFLOW_KEYS / ACTORFLOW_KEY_FILE, as a program's
    try:
        codec = Codec.from_env(key_file=key_file)
    except ConfigurationError as exc:
        raise BadValueError("--key-file", key_file, exc.expected) from exc
    return open_store(spec, codec=codec)


async def with_store(
    spec: str,
    body: Callable[[Store], Awaitable[T]],
    *,
    key_file: str | None = None,
    create: bool = False,
) -> T:
    """Open the store (with the keys ``key_file`` lists), run ``body`` with it, close it.

    Raises:
        StoreUnavailableError: ``create`` is false and ``spec`` is a folder that does not exist.
        ConfigurationError: the key file, ``ACTORFLOW_KEYS`` or ``ACTORFLOW_KEY_FILE``
            holds something unusable.
    """
    store = _open(spec, key_file) if create else open_existing_store(spec, key_file)
    try:
        if not create:
            await require_existing(store)
        return await body(store)
    finally:
        await store.aclose()


async def require_keys(store: Store) -> None:
    """Raise the store's own key error if a run is sealed with a key it was not given.

    For commands that must open every run (``prune``, ``recover`` of every
    orphan): the store's listing skips such runs with a warning, and the
    command would report success having left them out.

    Raises:
        EncryptionKeyError: a run is encrypted with a key missing (or wrong).
    """
    if not isinstance(store, UnreadableLister):
        return
    for entry in await store.list_unreadable():
        if entry.key_id and entry.run_id:
            await store.read_run(entry.run_id)  # raises the precise error: missing or wrong


def load_app(spec: str | None, store: str | None) -> Runtime:
    """The runtime ``spec`` (``module:attr``) names, or a plain one for the demo.

    ``attr`` is a ``Runtime`` or a function returning one; a function that
    takes a ``store`` parameter gets ``store``.
    Importing the module registers its workflow and agent classes; those of
    the default apps (:func:`add_default_app`) are registered either way.

    Raises:
        ConfigurationError: ``spec`` is malformed, or does not name a Runtime.
    """
    for load in _default_apps:
        load()
    if spec is None:
        return Runtime(store=store)
    target = _import_target(spec)
    if callable(target) and not isinstance(target, Runtime):
        params = _parameters(target)
        try:
            target = target(store=store) if store is not None and "store" in params else target()
        except (SystemExit, KeyboardInterrupt) as exc:
            raise ConfigurationError("--app", spec, _not_stopping(exc, "call")) from None
        except Exception as exc:
            raise ConfigurationError(
                "--app", spec, f"a function returning a Runtime ({type(exc).__name__}: {exc})"
            ) from exc
        store = None if "store" in params else store
    if not isinstance(target, Runtime):
        raise ConfigurationError("--app", spec, "a Runtime or a function returning one")
    runtime: Runtime = target
    if store is not None:
        # --store wins: the same options on another store.
        runtime = Runtime(
            store=store,
            config=runtime.config,
            mailbox_size=runtime.mailbox_size,
            supervisor=runtime.supervisor,
            shutdown_timeout=runtime.shutdown_timeout,
        )
    return runtime


def _import_target(spec: str) -> Any:
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise ConfigurationError("--app", spec, "module:attr, e.g. myproject.flows:runtime")
    # The user's program usually sits in the current folder, as for `python -m`.
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        target: Any = importlib.import_module(module_name)
        for part in attr.split("."):
            target = getattr(target, part)
    except (SystemExit, KeyboardInterrupt) as exc:
        # a script's `sys.exit()` or `input()` run at import: it is not a module to load
        raise ConfigurationError("--app", spec, _not_stopping(exc, "import")) from None
    except Exception as exc:  # the user's module may fail in any way while importing
        raise ConfigurationError(
            "--app", spec, f"an importable module:attr ({type(exc).__name__}: {exc})"
        ) from exc
    return target


def _not_stopping(exc: SystemExit | KeyboardInterrupt, when: str) -> str:
    what = f"sys.exit({exc.code!r})" if isinstance(exc, SystemExit) else "KeyboardInterrupt"
    return (
        f"a module:attr whose {when} does not stop the program (it raised {what}: "
        "keep a script's top-level code under `if __name__ == '__main__':`)"
    )


def _parameters(fn: Any) -> Mapping[str, Any]:
    try:
        return inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return {}


def check_writable(store: Store, *, create: bool = False) -> None:
    """Raise unless this process may write ``store`` (a file store: its folder; SQLite: its file).

    ``create``: a folder (a file) that does not exist yet is made by the first run.

    Raises:
        StoreUnavailableError: the folder does not exist (and ``create`` is
            false), or is a file; an SQLite store's file likewise.
        StoreReadOnlyError: the folder exists and this process may not write it
            (the SQLite file or its folder).
    """
    if isinstance(store, SqliteStore):
        _require_file(store.path, create=create)
        writable = os.access(store.path, os.W_OK) and os.access(
            os.path.dirname(os.path.abspath(store.path)), os.W_OK
        )
        if Path(store.path).is_file() and not writable:
            raise StoreReadOnlyError(store.path, "open store for writing")
        return
    if not isinstance(store, FileStore):
        return  # other stores say so at their first write
    _require_folder(store.path, create=create)
    runs = Path(store.path, "runs")
    folder = runs if runs.is_dir() else Path(store.path)
    if folder.is_dir() and not os.access(folder, os.W_OK):
        raise StoreReadOnlyError(store.path, "open store for writing")


def with_app(
    app_spec: str | None,
    store: str | None,
    debug: bool,
    call: Callable[[Runtime], Awaitable[T]],
    *,
    run_hint: str | None = None,
    create: bool = False,
    runs_until_stopped: bool = False,
) -> T:
    """Run ``call(runtime)`` on the app's runtime (``--store`` replacing its store).

    The store must exist, unless ``create``, and this process must be able
    to write it. ``run_hint`` names the run an interruption leaves for
    ``recover``, and ``runs_until_stopped`` marks a command whose stop is its
    normal end (see :func:`~actorflow.cli._app.run_command`).
    """
    store = chosen_store(store)
    given(app=app_spec, store=store)
    # An explicit --store (or ACTORFLOW_STORE) replaces the app's own store.
    spec = store if store is not None else os.environ.get("ACTORFLOW_STORE")

    async def body() -> T:
        runtime = load_app(app_spec, spec if app_spec else (spec or DEFAULT_STORE))
        try:
            check_writable(runtime.store, create=create)
            if not create:
                await require_existing(runtime.store)
        except StorageError:
            await runtime.store.aclose()
            raise
        return await call(runtime)

    result: T = run_command(
        body, debug=debug, run_hint=run_hint, runs_until_stopped=runs_until_stopped
    )
    return result
