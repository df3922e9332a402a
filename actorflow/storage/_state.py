"""Agents' states as bytes, and their evolution across versions of the state class.

A state class evolves by adding fields with defaults: older stored states then
decode as they are. When that is not enough (a field renamed, a type changed),
the class declares its version and how to upgrade older data::

    class Notes(msgspec.Struct):
        state_version: ClassVar[int] = 2
        items: list[str] = []

        @classmethod
        def upgrade_state(cls, data: Any, from_version: int) -> Any:
            if from_version == 1:  # version 1 kept one comma-separated string
                data["items"] = data.pop("text").split(",")
            return data

``upgrade_state`` receives the stored value as plain MessagePack data (dicts,
lists, strings, numbers, bytes) and returns it in the current version's shape.
The version a state was stored with travels beside it (``StateRef.version``).
"""

from __future__ import annotations

from typing import Any, TypeVar

import msgspec

from actorflow._text import error_message
from actorflow.errors import EncodingError, IncompatibleStateError
from actorflow.storage._codec import ENCODE_ERRORS, decoder_for, encoder

__all__ = ["decode_state", "encode_state", "state_version"]

T = TypeVar("T")


def state_version(state_type: type[Any]) -> int:
    """The version a state class declares with ``state_version`` (1 if none)."""
    version = getattr(state_type, "state_version", 1)
    if not isinstance(version, int) or version < 1:
        raise TypeError(f"{state_type.__qualname__}.state_version must be an int >= 1")
    return version


def encode_state(value: object, *, what: str = "state") -> bytes:
    """MessagePack of ``value``, encoded now so later changes to it cannot leak in.

    Raises:
        EncodingError: the value holds something msgspec cannot encode.
    """
    try:
        return encoder.encode(value)
    except ENCODE_ERRORS as exc:
        what = f"{what} of type {type(value).__qualname__}"
        raise EncodingError(what, error_message(exc)) from exc


def _plain() -> msgspec.msgpack.Decoder[Any]:
    decoder = decoder_for(Any)
    assert decoder is not None  # Any is hashable
    return decoder


def decode_state(data: bytes, state_type: type[T], *, version: int = 1) -> T:
    """Decode a state stored at ``version`` as the current ``state_type``.

    Raises:
        IncompatibleStateError: the data does not fit the class, was stored by a
            newer version of it, or needs an ``upgrade_state`` the class lacks.
    """
    current = state_version(state_type)
    name = state_type.__qualname__
    if version > current:
        raise IncompatibleStateError(
            name, version, current, "it was stored by a newer version of the class"
        )
    try:
        if version == current:
            decoder = decoder_for(state_type)
            if decoder is None:
                return msgspec.msgpack.decode(data, type=state_type)
            result: T = decoder.decode(data)
            return result
        upgrade = getattr(state_type, "upgrade_state", None)
        if upgrade is None:
            # decoding it as it is could drop what the old version held
            raise IncompatibleStateError(
                name, version, current, "the class has no `upgrade_state` for older versions"
            )
        raw = upgrade(_plain().decode(data), version)
        return msgspec.convert(raw, state_type)
    except (msgspec.DecodeError, msgspec.ValidationError, KeyError, TypeError) as exc:
        raise IncompatibleStateError(name, version, current, error_message(exc)) from exc
