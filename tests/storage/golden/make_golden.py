"""Writes the golden files once, as the format and state classes stood at version 1.

Run ``python tests/storage/golden/make_golden.py`` only when adding a new
golden generation (in a new folder); never rewrite existing files: the tests
check that today's code still reads what older code wrote.
"""

from __future__ import annotations

import pathlib

import msgspec

from actorflow.storage._records import (
    AgentSnapshot,
    DecisionRecord,
    PhaseEndRecord,
    Snapshot,
    StateRef,
    StepRecord,
)
from actorflow.storage._sealing import Codec

HERE = pathlib.Path(__file__).parent / "v1"
KEY = bytes(range(32))  # a test key, public on purpose


class NotesV1(msgspec.Struct):
    """Version 1 of the test state: one comma-separated string."""

    text: str
    count: int = 0


def golden_snapshot(blob: str) -> Snapshot:
    step = StepRecord(step_id="main/0", kind="ask", target="writer", args_hash="ab", result=b"\x01")
    return Snapshot(
        run_id="golden-run",
        snapshot_id="0001",
        position=3,
        created=1700000000.0,
        trigger="phase_end",
        format_version=1,  # the v1 files: written before snapshot format 2
        phase="draft#0",
        agents={
            "writer": AgentSnapshot(
                name="writer",
                type="tests.Notes",
                state=StateRef(agent="writer", type="tests.Notes", blob=blob, version=1),
            )
        },
        decisions=(DecisionRecord(step_id="main/1", agent="lead", type="plan", confidence=0.5),),
        phases={"draft#0": PhaseEndRecord(phase_id="draft#0", name="draft", result=b"\xa2ok")},
        steps=(step,),
        metrics={"steps": 3.0},
    )


def main() -> None:
    HERE.mkdir(exist_ok=True)
    state = msgspec.msgpack.encode(NotesV1(text="a,b,c", count=3))
    (HERE / "state_notes.msgpack").write_bytes(state)
    for name, codec in {
        "gzip": Codec(compression="gzip", compress_above=0),
        "zstd": Codec(compression="zstd", compress_above=0),
        "plain": Codec(compression=None),
        "aes": Codec(compression="gzip", compress_above=0, keys={"k1": KEY}),
    }.items():
        address, sealed_blob = codec.dump_blob(state, run_id="golden-run")
        (HERE / f"blob_{name}.bin").write_bytes(sealed_blob)
        (HERE / f"blob_{name}.address").write_text(address)
        sealed, _ = codec.dump_snapshot(golden_snapshot(address))
        (HERE / f"snapshot_{name}.bin").write_bytes(sealed)
        record = golden_snapshot(address).steps[0]
        (HERE / f"record_{name}.bin").write_bytes(
            codec.dump_record(record, run_id="golden-run", position=7)
        )


if __name__ == "__main__":
    main()
