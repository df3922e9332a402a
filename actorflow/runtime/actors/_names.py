"""Actor-name validation: names become parts of storage keys later."""

from __future__ import annotations

import re

from actorflow.errors import InvalidNameError

__all__ = ["validate_name"]

_VALID = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9._-]{0,127}")
_MAX = 128


def validate_name(name: object) -> str:
    """Return ``name`` if it is a valid actor name.

    Raises:
        InvalidNameError: ``name`` is not a string of 1-128 letters, digits,
            ``-``, ``_`` or ``.``, or it starts with ``.``.
    """
    if not isinstance(name, str):
        raise InvalidNameError(name, f"expected a str, got {type(name).__name__}")
    if _VALID.fullmatch(name) is not None:
        return name
    if not name:
        raise InvalidNameError(name, "it is empty")
    if len(name) > _MAX:
        raise InvalidNameError(name, f"it is {len(name)} characters long")
    if name.startswith("."):
        raise InvalidNameError(name, "it starts with '.'")
    bad = sorted({c for c in name if not (c.isascii() and (c.isalnum() or c in "._-"))})
    raise InvalidNameError(name, f"it contains {''.join(bad)!r}")
