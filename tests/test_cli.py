"""The ``actorflow`` command line, run on real stored data."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import anyio
import msgspec
import pytest
from typer.testing import CliRunner, Result

from actorflow import _inspect
from actorflow.cli import EXIT_CODES, app, exit_code_for
from actorflow.errors import (
    CheckpointCorruptedError,
    CheckpointNotFoundError,
    ConfigurationError,
    RunFailedError,
    RunLockedError,
    RunNotFoundError,
    RunPaused,
)
from actorflow.storage import (
    AgentSnapshot,
    DecisionRecord,
    FileStore,
    PhaseEndRecord,
    RunManifest,
    RunStatus,
    Snapshot,
    StateRef,
    StepRecord,
)

runner = CliRunner()


def test_help_lists_every_command() -> None:
    result = runner.invoke(app, ["--help"])
    assert result.exit_code == 0
    for command in ("runs", "checkpoints", "show", "log", "validate", "diff", "prune"):
        assert command in result.output


def test_python_dash_m_runs_the_same_cli() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "actorflow", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert "checkpoints" in proc.stdout


def test_a_missing_store_is_one_clear_line_not_a_traceback(tmp_path: Path) -> None:
    result = runner.invoke(app, ["runs", "--store", str(tmp_path / "nowhere")])
    assert result.exit_code == EXIT_CODES["error"]
    assert "no actorflow store at" in result.output
    assert "Traceback" not in result.output


def test_debug_shows_the_traceback(tmp_path: Path) -> None:
    result = runner.invoke(app, ["runs", "--store", str(tmp_path / "nowhere"), "--debug"])
    assert result.exit_code != 0
    assert result.exception is not None
    assert "no actorflow store at" in str(result.exception)


def test_the_store_comes_from_the_environment(tmp_path: Path) -> None:
    missing = str(tmp_path / "from-env")
    result = runner.invoke(app, ["runs"], env={"ACTORFLOW_STORE": missing})
    assert missing in result.output


@pytest.mark.parametrize(
    ("error", "code"),
    [
        (CheckpointCorruptedError("snap", "bad checksum"), "corrupt"),
        (RunNotFoundError("r"), "not_found"),
        (CheckpointNotFoundError("r", "c"), "not_found"),
        (RunFailedError("r", "ValueError", "x"), "run_failed"),
        (RunPaused("r", "ok?"), "paused"),
        (RunLockedError("r"), "locked"),
        (ConfigurationError("x", 1, "y"), "error"),
    ],
)
def test_errors_map_to_documented_exit_codes(error: Exception, code: str) -> None:
    assert exit_code_for(error) == EXIT_CODES[code]


class TestPlainValues:
    def test_bytes_become_text_or_base64(self) -> None:
        assert _inspect.plain({b"k": [b"text", b"\xff\x00"]}) == {"k": ["text", "base64:/wA="]}

    def test_stored_values_decode_without_their_type(self) -> None:
        class State(msgspec.Struct):
            done: list[str]
            blob: bytes

        data = msgspec.msgpack.encode(State(["a.py"], b"\xff"))
        assert _inspect.decode_value(data) == {"done": ["a.py"], "blob": "base64:/w=="}
        assert _inspect.decode_value(None) is None

    def test_json_dumps_what_plain_returns(self) -> None:
        value = _inspect.decode_value(msgspec.msgpack.encode({"x": (1, 2.5, None)}))
        assert json.loads(json.dumps(value)) == {"x": [1, 2.5, None]}


# --- the readers, on a real file store ------------------------------------------------


class Notes(msgspec.Struct):
    seen: list[str] = []
    score: float = 0.0


def _state(agent: str, notes: Notes) -> StateRef:
    return StateRef(agent=agent, type="Notes", data=msgspec.msgpack.encode(notes))


async def _populate(path: str) -> None:
    """Two runs as the engine writes them: manifest, log, a blob, three checkpoints."""
    store = FileStore(path)
    try:
        for run_id, status in (("run-a", RunStatus.COMPLETED), ("run-b", RunStatus.INTERRUPTED)):
            data = msgspec.msgpack.encode("goal")
            await store.create_run(
                RunManifest(
                    run_id=run_id,
                    workflow="Lead",
                    input=data,
                    input_hash="h",
                    status=status,
                    created=1_700_000_000.0,
                    updated=1_700_000_100.0,
                    phase="review",
                )
            )
        big = msgspec.msgpack.encode(Notes(seen=[f"file-{i}.py" for i in range(50)], score=0.9))
        blob = await store.put_blob("run-a", big)
        step = StepRecord(
            step_id="research.0/0",
            kind="ask",
            target="researcher-0",
            result=msgspec.msgpack.encode({"answer": "A"}),
            state=_state("researcher-0", Notes(seen=["a"])),
        )
        decision = DecisionRecord(
            step_id="review.0/1",
            agent="orchestrator",
            type="revise",
            rationale="too vague",
            confidence=0.4,
            alternatives=("accept",),
        )
        phase_end = PhaseEndRecord(
            phase_id="research.0", name="research", result=msgspec.msgpack.encode([1, 2])
        )
        await store.append("run-a", [step, phase_end, decision])
        first = Snapshot(
            run_id="run-a",
            snapshot_id="0001-research",
            position=1,
            created=1_700_000_010.0,
            trigger="phase_end",
            phase="research",
            agents={
                "researcher-0": AgentSnapshot(
                    name="researcher-0", type="Researcher", state=step.state
                )
            },
            steps=(step,),
            metrics={"steps": 1.0},
        )
        second = msgspec.structs.replace(
            first,
            snapshot_id="0002-review",
            position=3,
            created=1_700_000_020.0,
            phase="review",
            agents={
                "researcher-0": AgentSnapshot(
                    name="researcher-0",
                    type="Researcher",
                    confidence=0.9,
                    state=StateRef(agent="researcher-0", type="Notes", blob=blob),
                ),
                "reviewer": AgentSnapshot(name="reviewer", type="Reviewer"),
            },
            phases={"research.0": phase_end},
            steps=(),
            decisions=(decision,),
            metrics={"steps": 3.0},
        )
        third = msgspec.structs.replace(
            second, snapshot_id="0003-done", position=3, created=1_700_000_030.0, trigger="final"
        )
        for snap in (first, second, third):
            await store.write_snapshot(snap)
    finally:
        await store.aclose()


@pytest.fixture
def store_dir(tmp_path: Path) -> str:
    path = str(tmp_path / "store")
    anyio.run(_populate, path)
    return path


def cli(*args: str) -> Result:
    return runner.invoke(app, list(args), env={"COLUMNS": "200"})


class TestReaders:
    def test_runs_lists_every_run(self, store_dir: str) -> None:
        result = cli("runs", "--store", store_dir)
        assert result.exit_code == 0, result.output
        assert "run-a" in result.output
        assert "run-b" in result.output
        assert "completed" in result.output

    def test_runs_filters_by_status_and_prints_json(self, store_dir: str) -> None:
        result = cli("runs", "--store", store_dir, "--status", "interrupted", "--json")
        assert result.exit_code == 0, result.output
        rows = json.loads(result.stdout)
        assert [r["run_id"] for r in rows] == ["run-b"]
        assert rows[0]["phase"] == "review"

    def test_runs_rejects_an_unknown_status(self, store_dir: str) -> None:
        result = cli("runs", "--store", store_dir, "--status", "sleepy")
        assert result.exit_code == EXIT_CODES["usage"]

    def test_checkpoints_lists_sizes_and_verifies_checksums(self, store_dir: str) -> None:
        rows = json.loads(cli("checkpoints", "run-a", "--store", store_dir, "--json").stdout)
        assert [r["snapshot_id"] for r in rows] == ["0001-research", "0002-review", "0003-done"]
        assert all(r["checksum"] == "ok" and r["stored_size"] > 0 for r in rows)
        table = cli("checkpoints", "run-a", "--store", store_dir)
        assert table.exit_code == 0
        assert "0002-review" in table.output

    def test_checkpoints_of_an_unknown_run_exits_4(self, store_dir: str) -> None:
        result = cli("checkpoints", "nope", "--store", store_dir)
        assert result.exit_code == EXIT_CODES["not_found"]
        assert "no run 'nope'" in result.output

    def test_show_decodes_agent_states_from_inline_data_and_blobs(self, store_dir: str) -> None:
        result = cli("show", "run-a", "0002", "--store", store_dir)
        assert result.exit_code == 0, result.output
        shown = json.loads(result.stdout)
        state = shown["agents"]["researcher-0"]["state"]
        assert state["score"] == 0.9
        assert len(state["seen"]) == 50
        assert shown["phases"] == {"research.0": [1, 2]}
        assert shown["decisions"][0]["rationale"] == "too vague"
        first = json.loads(cli("show", "run-a", "latest~2", "--store", store_dir).stdout)
        assert first["agents"]["researcher-0"]["state"] == {"seen": ["a"], "score": 0.0}
        assert first["steps"][0]["result"] == {"answer": "A"}

    def test_show_latest_and_an_unknown_checkpoint(self, store_dir: str) -> None:
        latest = json.loads(cli("show", "run-a", "latest", "--store", store_dir).stdout)
        assert latest["snapshot_id"] == "0003-done"
        result = cli("show", "run-a", "0009", "--store", store_dir)
        assert result.exit_code == EXIT_CODES["not_found"]
        assert "actorflow checkpoints run-a" in result.output

    def test_log_prints_steps_phase_ends_and_decisions_with_rationale(self, store_dir: str) -> None:
        result = cli("log", "run-a", "--store", store_dir)
        assert result.exit_code == 0, result.output
        assert "research.0/0" in result.output
        assert "phase end" in result.output
        assert "revise" in result.output
        assert "rationale: too vague" in result.output
        assert "confidence=0.40" in result.output

    def test_log_json_is_one_object_per_line(self, store_dir: str) -> None:
        result = cli("log", "run-a", "--store", store_dir, "--json", "--start", "1")
        lines = [json.loads(line) for line in result.stdout.splitlines()]
        assert [(x["position"], x["tag"]) for x in lines] == [(1, "phase_end"), (2, "decision")]

    def test_log_follow_stops_when_the_run_is_finished(self, store_dir: str) -> None:
        result = cli("log", "run-a", "--store", store_dir, "--follow")
        assert result.exit_code == 0
        assert "revise" in result.output

    def test_diff_names_agents_state_fields_phases_and_decisions(self, store_dir: str) -> None:
        result = cli(
            "diff", "run-a", "0001-research", "0002-review", "--store", store_dir, "--json"
        )
        assert result.exit_code == 0, result.output
        d = json.loads(result.stdout)
        assert d["agents"]["reviewer"] == {"change": "added"}
        changed = d["agents"]["researcher-0"]
        assert changed["confidence"] == [None, 0.9]
        assert changed["state"]["score"] == [0.0, 0.9]
        assert changed["state"]["seen"] == [["a"], "<list of 50>"]
        assert d["phases_finished"] == ["research.0"]
        assert [x["type"] for x in d["decisions_added"]] == ["revise"]
        assert d["metrics"] == {"steps": [1.0, 3.0]}
        table = cli("diff", "run-a", "0001-research", "--store", store_dir)
        assert table.exit_code == 0
        assert "researcher-0" in table.output
        assert "revise" in table.output

    def test_validate_passes_on_intact_data(self, store_dir: str) -> None:
        result = cli("validate", "--store", store_dir)
        assert result.exit_code == 0, result.output
        assert "2 run(s), 3 log record(s), 3 checkpoint(s), 1 blob(s) checked" in result.output

    def test_validate_names_a_corrupt_checkpoint_and_exits_3(self, store_dir: str) -> None:
        [snap] = Path(store_dir).glob("runs/run-a/snapshots/*0002-review*")
        data = bytearray(snap.read_bytes())
        data[-5] ^= 0xFF
        snap.write_bytes(bytes(data))
        result = cli("validate", "run-a", "--store", store_dir)
        assert result.exit_code == EXIT_CODES["corrupt"]
        assert "checkpoint 0002-review" in result.output
        report = json.loads(cli("validate", "--store", store_dir, "--json").stdout)
        assert report["ok"] is False
        assert [p["what"] for p in report["problems"]] == ["checkpoint 0002-review"]
        rows = json.loads(cli("checkpoints", "run-a", "--store", store_dir, "--json").stdout)
        assert rows[1]["checksum"].startswith("corrupt")

    def test_validate_names_a_corrupt_blob(self, store_dir: str) -> None:
        [blob] = Path(store_dir).glob("runs/run-a/blobs/*")
        data = bytearray(blob.read_bytes())
        data[-1] ^= 0xFF
        blob.write_bytes(bytes(data))
        result = cli("validate", "--store", store_dir)
        assert result.exit_code == EXIT_CODES["corrupt"]
        assert f"blob {blob.name}" in result.output

    def test_prune_keeps_the_newest_checkpoints(self, store_dir: str) -> None:
        result = cli("prune", "--keep", "1", "--store", store_dir, "--json")
        assert result.exit_code == 0, result.output
        assert json.loads(result.stdout)["snapshots_deleted"] == 2
        rows = json.loads(cli("checkpoints", "run-a", "--store", store_dir, "--json").stdout)
        assert [r["snapshot_id"] for r in rows] == ["0003-done"]

    def test_prune_rejects_a_bad_age_in_one_line(self, store_dir: str) -> None:
        result = cli("prune", "--max-age", "soon", "--store", store_dir)
        assert result.exit_code == EXIT_CODES["error"]
        assert "invalid value 'soon' for --max-age" in result.output


class TestRunningErrors:
    def test_a_bad_environment_value_is_one_line(self, tmp_path: Path) -> None:
        result = runner.invoke(
            app,
            ["demo", "--path", str(tmp_path), "--store", str(tmp_path / "s")],
            env={"ACTORFLOW_DURABILITY": "fast"},
        )
        assert result.exit_code == EXIT_CODES["error"]
        assert "invalid value 'fast' for ACTORFLOW_DURABILITY" in result.output
        assert "Traceback" not in result.output

    def test_demo_needs_an_existing_folder(self, tmp_path: Path) -> None:
        result = runner.invoke(app, ["demo", "--path", str(tmp_path / "none")])
        assert result.exit_code == EXIT_CODES["error"]
        assert "for --path: expected an existing folder" in result.output

    @pytest.mark.parametrize(
        ("spec", "says"),
        [
            ("json", "expected module:attr"),
            ("no_such_module_here:runtime", "No module named"),
            ("json:no_such_name", "has no attribute"),
            ("json:dumps", "a function returning a Runtime (TypeError"),
            ("json:__name__", "a Runtime or a function returning one"),
        ],
    )
    def test_app_errors_say_what_is_wrong(self, tmp_path: Path, spec: str, says: str) -> None:
        result = runner.invoke(app, ["recover", "--app", spec, "--store", str(tmp_path)])
        assert result.exit_code == EXIT_CODES["error"]
        assert says in result.output
