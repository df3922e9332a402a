"""Stored values made plain for JSON, decoded without their classes."""

from __future__ import annotations

import json

import msgspec

from actorflow.runtime import reading as _inspect


class TestPlainValues:
    def test_bytes_become_text_or_base64(self) -> None:
        assert _inspect.plain({b"k": [b"text", b"\xff\x00"]}) == {"k": ["text", "base64:/wA="]}

    def test_stored_values_decode_without_their_type(self) -> None:
        class State(msgspec.Struct):
            done: list[str]
            blob: bytes

        data = msgspec.msgpack.encode(State(["a.py"], b"\xff"))
        assert _inspect.decode_plain(data) == {"done": ["a.py"], "blob": "base64:/w=="}
        assert _inspect.decode_plain(None) is None

    def test_json_dumps_what_plain_returns(self) -> None:
        value = _inspect.decode_plain(msgspec.msgpack.encode({"x": (1, 2.5, None)}))
        assert json.loads(json.dumps(value)) == {"x": [1, 2.5, None]}
