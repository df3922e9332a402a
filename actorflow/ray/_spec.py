"""What crosses Ray between the driver, hosts and placed agents: msgspec bytes, never pickles.

A Struct pickled into a Ray worker can arrive without its fields (msgspec
issue 394: a class from ``__main__``), and stores hold clients that do not
pickle at all; so everything here is MessagePack, and classes travel as the
names the actor registry resolves.
"""

from __future__ import annotations

import importlib
import sys
import typing
from typing import Any

import msgspec

from actorflow.errors import ClassNotShippedError
from actorflow.runtime import AdoptionPolicy, RuntimeConfig

__all__ = [
    "CallReply",
    "CallRequest",
    "HostInfo",
    "HostSpec",
    "decode_config",
    "encode",
    "import_all",
]

encode = msgspec.msgpack.Encoder().encode


class HostSpec(msgspec.Struct, frozen=True, kw_only=True):
    """Everything a host needs to open its runtime, sent to it as bytes."""

    name: str
    namespace: str
    store: str
    store_options: dict[str, Any] = {}
    config: bytes = b""
    adoption: AdoptionPolicy = AdoptionPolicy()
    imports: tuple[str, ...] = ()
    node_watch_interval: float = 1.0
    placed_start_timeout: float = 60.0


class HostInfo(msgspec.Struct, frozen=True, kw_only=True):
    """What a host says of itself once started (or why it could not start)."""

    name: str
    owner: str = ""
    node_id: str = ""
    pid: int = 0
    error: str | None = None


class CallRequest(msgspec.Struct, frozen=True, kw_only=True):
    """One message to a placed agent: one bytes argument for Ray to carry."""

    run_id: str
    name: str
    incarnation: str
    seq: int
    type: str
    message: msgspec.Raw
    step: bytes | None = None


class CallReply(msgspec.Struct, frozen=True, kw_only=True):
    """A placed agent's answer to one message.

    ``lost``: the Ray actor no longer holds that agent (it was restarted, or
    the agent was replaced); the sender starts it again from the state it
    last saw. ``error_type``/``error``: the handler raised.
    """

    value: bytes = b""
    state: bytes = b""
    report: bytes | None = None
    error_type: str | None = None
    error: str | None = None
    lost: bool = False


def decode_config(data: bytes) -> RuntimeConfig:
    """A ``RuntimeConfig`` from its MessagePack bytes (``b""``: from the environment).

    Field by field, each with the type its defining module gives it: the
    class is re-exported under ``actorflow.runtime``, where msgspec would
    look its annotations up and not find them all.
    """
    if not data:
        return RuntimeConfig.from_env()
    raw = msgspec.msgpack.decode(data)
    # the defining module's namespace: the only one where every annotation resolves
    module = importlib.import_module("actorflow.runtime.workflow._config")
    hints = typing.get_type_hints(RuntimeConfig, globalns=vars(module))
    return RuntimeConfig(**{key: msgspec.convert(value, hints[key]) for key, value in raw.items()})


def import_all(modules: tuple[str, ...], where: str) -> None:
    """Import the user's modules (their classes register as they are defined).

    Raises:
        ClassNotShippedError: one does not import here (its code was not shipped).
    """
    for module in modules:
        try:
            importlib.import_module(module)
        except ImportError as exc:
            raise ClassNotShippedError(
                f"module {module}",
                where,
                f"{type(exc).__name__}: {exc}; sys.path starts {sys.path[:3]!r}",
            ) from exc
