"""Messages typed on the command line: a type found by its registered name, a payload decoded as it.

``actorflow signal RUN TYPE`` and ``update RUN TYPE`` name the message's type
as the run stores it (see :func:`~actorflow.runtime.reading.find_message_type`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec

from actorflow.cli._app import BadValueError
from actorflow.runtime.reading import find_message_type
from actorflow.runtime.registry import class_name

__all__ = ["decode_message", "find_message_type", "read_payload"]


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
    try:
        return "--file", Path(file).read_bytes()
    except OSError as exc:
        raise BadValueError("--file", file, f"a readable file ({exc.strerror})") from exc


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
