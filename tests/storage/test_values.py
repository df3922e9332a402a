"""``encode_value`` / ``decode_value``: one encoder and one decoder per type for the package."""

from __future__ import annotations

from typing import Annotated

import msgspec
import pytest

from actorflow.errors import CorruptedDataError, EncodingError
from actorflow.storage import StepRecord, decode_value, encode_value
from actorflow.storage._codec import decoder_for, encoder


class Point(msgspec.Struct):
    x: int
    y: int = 0


def test_a_value_round_trips_through_the_one_encoder() -> None:
    data = encode_value(Point(1, 2), "point")
    assert data == encoder.encode(Point(1, 2))
    assert decode_value(data, Point, "point") == Point(1, 2)


def test_decoders_are_built_once_per_type() -> None:
    assert decoder_for(Point) is decoder_for(Point)
    assert decoder_for(StepRecord) is decoder_for(StepRecord)


def test_an_unhashable_type_decodes_without_the_cache() -> None:
    unhashable = Annotated[list[int], ["not hashable"]]
    assert decoder_for(unhashable) is None
    assert decode_value(encode_value([1, 2], "numbers"), unhashable, "numbers") == [1, 2]


def test_an_unencodable_value_names_what_and_detail() -> None:
    with pytest.raises(EncodingError) as caught:
        encode_value(object(), "result of step", "s-3")
    assert caught.value.what == "result of step s-3"
    with pytest.raises(EncodingError) as caught:
        encode_value({1j}, "input")
    assert caught.value.what == "input"


def test_bytes_of_the_wrong_shape_are_corrupt_data_naming_the_value() -> None:
    with pytest.raises(CorruptedDataError) as caught:
        decode_value(encode_value("text", "x"), Point, "result of phase", "draft")
    assert caught.value.location == "result of phase draft"
    assert "does not decode as" in caught.value.cause_text
    with pytest.raises(CorruptedDataError):
        decode_value(b"\xc1", int, "input")
