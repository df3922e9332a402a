"""Messages typed on the command line: a type found by its registered name, a payload decoded as it.

``actorflow signal RUN TYPE`` and ``update RUN TYPE`` name the message's type
as the run stores it (see :func:`~actorflow.runtime.reading.find_message_type`).
"""

from __future__ import annotations

from typing import Any

import msgspec

from actorflow._files import read_regular_file
from actorflow.cli._app import BadValueError
from actorflow.errors import UnreadableFileError
from actorflow.runtime.reading import find_message_type
from actorflow.runtime.registry import class_name

__all__ = [
    "MAX_INPUT_FILE_BYTES",
    "decode_message",
    "find_message_type",
    "read_input",
    "read_payload",
]

MAX_INPUT_FILE_BYTES = 256 << 20
"""The largest file read as a message or a state (``--file``, ``--edit``): a bound, so that
a device such as ``/dev/zero`` is refused rather than read."""


def read_input(
    option: str, file: str, *, value: str | None = None, expected: str = "a readable file"
) -> bytes:
    """The bytes of ``file``, given with ``option``: a regular file only, bounded.

    Raises:
        BadValueError: it cannot be read, or is a folder, FIFO or device, or too large;
            the message names ``value`` (default: ``file``), ``expected`` and why.
    """
    try:
        return read_regular_file(file, limit=MAX_INPUT_FILE_BYTES)
    except UnreadableFileError as exc:
        why = exc.cause_text
    except OSError as exc:
        why = exc.strerror or type(exc).__name__
    raise BadValueError(option, value or file, f"{expected} ({file}: {why})")


def read_payload(json_text: str | None, file: str | None) -> tuple[str, bytes]:
    """The payload's JSON from ``--json DATA`` or ``--file F``, and the option that gave it.

    Raises:
        BadValueError: neither or both are given, or the file cannot be read.
    """
    if (json_text is None) == (file is None):
        raise BadValueError("--json / --file", json_text or file, "exactly one of them")
    if json_text is not None:
        return "--json", json_text.encode()
    assert file is not None
    return "--file", read_input("--file", file)


def decode_message(cls: type[Any], data: bytes, *, option: str) -> Any:
    """``data`` (JSON) as a value of ``cls``.

    Raises:
        BadValueError: ``data`` is not JSON, or not a value of ``cls``; the
            message names the field that does not fit.
    """
    try:
        return msgspec.json.decode(data, type=cls)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        text = data.decode(errors="replace")
        raise BadValueError(option, text, f"JSON for a {class_name(cls)} ({exc})") from exc
