"""Encryption keys from the environment: ``ACTORFLOW_KEYS``, ``_KEY_FILE``, ``_KEY_ID``.

A store opened from a location (:func:`~actorflow.storage.open_store`, so
``Runtime(store="...")`` and the ``actorflow`` command line too) is encrypted
with the keys these name, so a program and the CLI read one store the same way.
Keys are entries ``<key id>:<key in base64>`` (16, 24 or 32 bytes), separated
by commas or new lines; in a key file, lines starting with ``#`` are comments.
New data is encrypted with ``ACTORFLOW_KEY_ID``, else with the last key listed
(rotating is adding a key at the end). The keys themselves never appear in an
error message. A key id listed twice is an error (which key would decrypt?),
and a key file that other users may read is used with a warning
(``key_file_readable_by_others``).
"""

from __future__ import annotations

import base64
import binascii
import os
import stat
from typing import TYPE_CHECKING

from actorflow._files import read_regular_file
from actorflow._log import get_logger
from actorflow.errors import ConfigurationError, UnreadableFileError

if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = ["KEYS_VARIABLE", "KEY_FILE_VARIABLE", "KEY_ID_VARIABLE", "keys_from_env", "parse_keys"]

KEYS_VARIABLE = "ACTORFLOW_KEYS"
KEY_FILE_VARIABLE = "ACTORFLOW_KEY_FILE"
KEY_ID_VARIABLE = "ACTORFLOW_KEY_ID"

_log = get_logger("actorflow.storage")

_MAX_KEY_FILE = 1024 * 1024
"""Bytes: far more than any list of keys takes."""

_FORMAT = "entries <key id>:<base64 key of 16, 24 or 32 bytes>, separated by commas or lines"


def parse_keys(text: str, *, source: str) -> dict[str, bytes]:
    """The keys ``text`` lists, in order (``source`` names where it came from, for errors).

    Raises:
        ConfigurationError: an entry is not ``id:base64``, a key has a bad size,
            or a key id is listed twice.
    """
    keys: dict[str, bytes] = {}
    for line in text.splitlines():
        if line.lstrip().startswith("#"):
            continue
        for entry in line.split(","):
            if not entry.strip():
                continue
            key_id, sep, encoded = entry.strip().partition(":")
            if not sep or not key_id.strip():
                raise ConfigurationError(source, "<redacted>", _FORMAT)
            try:
                # standard or URL-safe alphabet, padding optional
                key = base64.b64decode(_padded(encoded.strip()), altchars=b"-_", validate=True)
            except (binascii.Error, ValueError):
                raise ConfigurationError(source, "<redacted>", _FORMAT) from None
            if len(key) not in (16, 24, 32):
                raise ConfigurationError(source, "<redacted>", _FORMAT)
            if key_id.strip() in keys:
                raise ConfigurationError(
                    source,
                    f"key id {key_id.strip()!r} listed twice",
                    "each key id once: two keys under one id cannot both decrypt",
                )
            keys[key_id.strip()] = key
    return keys


def _padded(text: str) -> str:
    text = text.replace("+", "-").replace("/", "_")
    return text + "=" * (-len(text) % 4)


def keys_from_env(
    env: Mapping[str, str] | None = None, *, key_file: str | os.PathLike[str] | None = None
) -> tuple[dict[str, bytes], str | None]:
    """The keys the environment configures, and the id of the one new data uses.

    Args:
        env: the variables (default ``os.environ``).
        key_file: a key file that replaces ``ACTORFLOW_KEY_FILE`` (the CLI's ``--key-file``).

    Returns:
        ``({}, None)`` when no key is configured.

    Raises:
        ConfigurationError: both ``ACTORFLOW_KEYS`` and a key file are given, the
            file cannot be read, an entry is malformed, or ``ACTORFLOW_KEY_ID``
            names a key not listed.
    """
    env = os.environ if env is None else env
    inline = env.get(KEYS_VARIABLE)
    path = os.fspath(key_file) if key_file is not None else env.get(KEY_FILE_VARIABLE)
    if inline and path:
        raise ConfigurationError(
            KEYS_VARIABLE, "<redacted>", f"unset when {KEY_FILE_VARIABLE} or --key-file is given"
        )
    if path:
        try:
            # a FIFO or a device given for one must fail at once, never hang or fill memory
            text = read_regular_file(path, limit=_MAX_KEY_FILE).decode("utf-8")
            mode = os.stat(path).st_mode
        except UnreadableFileError as exc:
            raise ConfigurationError(
                KEY_FILE_VARIABLE, path, f"a readable key file (it is {exc.cause_text})"
            ) from None
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigurationError(
                KEY_FILE_VARIABLE, path, f"a readable key file ({exc})"
            ) from None
        if os.name == "posix" and mode & (stat.S_IRWXG | stat.S_IRWXO):
            # the keys open every run they sealed: readable by others, they protect nothing
            _log.warning(
                "key_file_readable_by_others",
                path=path,
                mode=oct(stat.S_IMODE(mode)),
                advice=f"chmod 600 {path}",
            )
        keys = parse_keys(text, source=f"key file {path}")
    elif inline:
        keys = parse_keys(inline, source=KEYS_VARIABLE)
    else:
        return {}, None
    if not keys:
        raise ConfigurationError(path or KEYS_VARIABLE, "<empty>", _FORMAT)
    key_id = env.get(KEY_ID_VARIABLE) or list(keys)[-1]
    if key_id not in keys:
        raise ConfigurationError(KEY_ID_VARIABLE, key_id, f"one of the keys listed: {list(keys)}")
    return keys, key_id
