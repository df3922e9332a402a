"""What crosses Ray between the driver, hosts and placed agents: msgspec bytes, never pickles.

A Struct pickled into a Ray worker can arrive without its fields (msgspec
issue 394: a class from ``__main__``), and stores hold clients that do not
pickle at all; so everything here is MessagePack, and classes travel as the
names the actor registry resolves.
"""

from __future__ import annotations

import importlib
import sys
from typing import Any

import msgspec

from actorflow.errors import ClassNotShippedError, ConfigurationError
from actorflow.runtime import AdoptionPolicy, RuntimeConfig
from actorflow.runtime.cluster import config_types
from actorflow.runtime.flow import Limit

__all__ = [
    "CallReply",
    "CallRequest",
    "HostInfo",
    "HostSpec",
    "decode_config",
    "encode",
    "import_all",
    "spec_differences",
]

encode = msgspec.msgpack.Encoder().encode


class HostSpec(msgspec.Struct, frozen=True, kw_only=True):
    """Everything a host needs to open its runtime, sent to it as bytes."""

    name: str
    namespace: str
    store: str
    started_by: str = ""
    """The driver connection that started the host; not part of what is compared."""
    store_options: dict[str, Any] = {}
    config: bytes = b""
    adoption: AdoptionPolicy = AdoptionPolicy()
    imports: tuple[str, ...] = ()
    node_watch_interval: float = 1.0
    placed_start_timeout: float = 60.0
    runtime_env: dict[str, Any] | None = None
    """How the host's code was shipped; not used by the host, compared by a later driver."""
    resources: dict[str, Any] = {}
    """What the host reserves (Ray actor options); compared, like ``runtime_env``."""
    limits: tuple[Limit, ...] = ()
    """The driver runtime's limits; their budgets are the namespace's budget actors."""


class HostInfo(msgspec.Struct, frozen=True, kw_only=True):
    """What a host says of itself once started (or why it could not start)."""

    name: str
    owner: str = ""
    node_id: str = ""
    pid: int = 0
    error: str | None = None
    spec: bytes = b""
    """The ``HostSpec`` it was started with (empty from hosts of older actorflow versions)."""


class CallRequest(msgspec.Struct, frozen=True, kw_only=True):
    """One message to a placed agent: one bytes argument for Ray to carry."""

    run_id: str
    name: str
    incarnation: str
    seq: int
    type: str
    message: msgspec.Raw
    step: bytes | None = None
    reply_to: str | None = None
    """The host actor that records the step's milestones (``None``: they travel with the reply)."""


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


_NOT_COMPARED = frozenset({"name", "started_by"})


def spec_differences(ours: HostSpec, theirs: bytes) -> list[str]:
    """What differs between this driver's spec and a running host's (name and starter aside).

    Names only, never values: store options hold credentials. A config that
    differs is named field by field (``config.code_version``).
    """
    if not theirs:
        return ["everything (the host was started by an older actorflow)"]
    try:
        other = msgspec.msgpack.decode(theirs, type=HostSpec)
    except msgspec.DecodeError:
        return ["everything (the host's spec does not decode here)"]
    out: list[str] = []
    for field in HostSpec.__struct_fields__:
        if field in _NOT_COMPARED or getattr(ours, field) == getattr(other, field):
            continue
        if field == "config":
            try:
                ours_config, their_config = decode_config(ours.config), decode_config(other.config)
            except (msgspec.DecodeError, msgspec.ValidationError, ConfigurationError):
                out.append("config")  # written by another actorflow version: it differs
                continue
            out.extend(
                f"config.{name}"
                for name in RuntimeConfig.__struct_fields__
                if getattr(ours_config, name) != getattr(their_config, name)
            )
        else:
            out.append(field)
    return out


def decode_config(data: bytes) -> RuntimeConfig:
    """A ``RuntimeConfig`` from its MessagePack bytes (``b""``: from the environment).

    Raises:
        ConfigurationError: it holds options this version does not know.

    Field by field, each with its type (``config_types``), so an option this
    version does not know is named.
    """
    if not data:
        return RuntimeConfig.from_env()
    raw = msgspec.msgpack.decode(data)
    hints = config_types()
    unknown = sorted(set(raw) - set(hints))
    if unknown:
        raise ConfigurationError(
            "RuntimeConfig",
            unknown,
            "options this actorflow version knows: the driver runs a newer actorflow than "
            "this node; install the same version on every node of the cluster",
        )
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
