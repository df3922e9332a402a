"""The readers and ``prune``, on a real file store."""

from __future__ import annotations

import json
from pathlib import Path

from structlog.testing import capture_logs
from typer.testing import CliRunner, Result

from actorflow.cli import EXIT_CODES, app

runner = CliRunner()


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

    def test_checkpoints_say_which_ones_fork_can_use(self, store_dir: str) -> None:
        def forkable() -> list[bool]:
            rows = json.loads(cli("checkpoints", "run-a", "--store", store_dir, "--json").stdout)
            return [r["forkable"] for r in rows]

        assert forkable() == [True, True, True]
        table = cli("checkpoints", "run-a", "--store", store_dir)
        assert "fork" in table.output
        assert table.output.count(" yes ") == 3
        [snap] = Path(store_dir).glob("runs/run-a/snapshots/*0001-research*")
        data = bytearray(snap.read_bytes())
        data[-5] ^= 0xFF
        snap.write_bytes(bytes(data))
        assert forkable() == [False, True, True]
        # the two later ones keep the researcher's state in a blob, which a fork copies
        [blob] = Path(store_dir).glob("runs/run-a/blobs/*")
        blob.unlink()
        assert forkable() == [False, False, False]
        assert " yes " not in cli("checkpoints", "run-a", "--store", store_dir).output

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

    def test_validate_says_what_a_torn_unsynced_checkpoint_is(self, store_dir: str) -> None:
        [snap] = Path(store_dir).glob("runs/run-a/snapshots/*0002-review*~unsynced.ckpt")
        snap.write_bytes(snap.read_bytes()[:20])  # what a power loss leaves of a recent one
        report = json.loads(cli("validate", "--store", store_dir, "--json").stdout)
        [problem] = report["problems"]
        assert problem["what"] == "checkpoint 0002-review"
        assert problem["detail"].startswith("not synced yet, so a power loss may have cut it")
        result = cli("validate", "run-a", "--store", store_dir)
        assert result.exit_code == EXIT_CODES["corrupt"]
        assert "harmless, recovery skips it" in " ".join(result.output.split())

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
        # the two others are phase ends, which fork starts from: kept without an age limit
        assert json.loads(result.stdout)["snapshots_deleted"] == 0
        result = cli("prune", "--keep", "1", "--max-age", "1d", "--store", store_dir, "--json")
        assert result.exit_code == 0, result.output
        assert json.loads(result.stdout)["snapshots_deleted"] == 2
        rows = json.loads(cli("checkpoints", "run-a", "--store", store_dir, "--json").stdout)
        assert [r["snapshot_id"] for r in rows] == ["0003-done"]

    def test_prune_rejects_a_bad_age_in_one_line_as_bad_usage(self, store_dir: str) -> None:
        result = cli("prune", "--max-age", "3x", "--store", store_dir)
        assert result.exit_code == EXIT_CODES["usage"]
        assert result.output == (
            "error: invalid value '3x' for --max-age: expected a duration such as "
            "30s, 10m, 2h or 7d\n"
        )
        result = cli("prune", "--max-age", "soon", "--store", store_dir)
        assert result.exit_code == EXIT_CODES["usage"]
        assert "invalid value 'soon' for --max-age" in result.output


def _flip(path: Path, at: int) -> None:
    data = bytearray(path.read_bytes())
    data[at] ^= 0xFF
    path.write_bytes(bytes(data))


class TestDamagedStore:
    """One damaged entry never blocks the others, and `validate` names each one."""

    def test_a_damaged_manifest_and_a_stray_folder_hide_no_other_run(self, store_dir: str) -> None:
        runs = Path(store_dir) / "runs"
        _flip(runs / "run-b" / "manifest", 40)
        (runs / "lost+found").mkdir()
        with capture_logs() as logs:  # the warnings, kept out of the JSON on stdout
            listed = cli("runs", "--store", store_dir, "--json")
            result = cli("validate", "--store", store_dir)
            report = json.loads(cli("validate", "--store", store_dir, "--json").stdout)
        assert listed.exit_code == 0, listed.output
        assert [r["run_id"] for r in json.loads(listed.stdout)] == ["run-a"]
        assert {e["location"] for e in logs if e["event"] == "run_unreadable"} == {
            str(runs / "run-b" / "manifest"),
            str(runs / "lost+found"),
        }
        assert result.exit_code == EXIT_CODES["corrupt"]
        assert f"run run-b {runs / 'run-b' / 'manifest'}" in result.output
        assert f"{runs / 'lost+found'}: not a run" in result.output
        assert report["runs"] == 1  # run-a was still checked
        assert sorted(p["run_id"] or "" for p in report["problems"]) == ["", "run-b"]

    def test_validate_names_a_run_folder_whose_manifest_is_gone(self, store_dir: str) -> None:
        (Path(store_dir) / "runs" / "run-a" / "manifest").unlink()
        with capture_logs():
            result = cli("validate", "--store", store_dir)
        assert result.exit_code == EXIT_CODES["corrupt"]
        assert "run run-a" in result.output
        assert "without a manifest" in result.output

    def test_prune_never_follows_a_link_out_of_the_store(
        self, store_dir: str, tmp_path: Path
    ) -> None:
        outside = tmp_path / "precious"
        (outside / "sub").mkdir(parents=True)
        (outside / "sub" / "keep.txt").write_text("mine")
        (Path(store_dir) / "runs" / "run-a" / "blobs" / "evil").symlink_to(outside)
        result = cli("prune", "--delete-completed", "--store", store_dir, "--json")
        assert result.exit_code == 0, result.output
        assert json.loads(result.stdout)["runs_deleted"] == 1
        assert (outside / "sub" / "keep.txt").read_text() == "mine"
        assert not list((Path(store_dir) / "runs").glob(".trash-*"))
        assert cli("validate", "--store", store_dir).exit_code == 0
