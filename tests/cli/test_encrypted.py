"""An encrypted store on the command line: the keys as the library reads them, and without them.

With ``--key-file`` (or ``ACTORFLOW_KEYS`` / ``ACTORFLOW_KEY_FILE``, which the
library reads too) every command works. Without the key, ``runs`` lists each
run as encrypted, ``validate`` verifies every checksum without opening
anything, and the commands that need plaintext exit 9 saying how to give the key.
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from pathlib import Path

import anyio
import pytest
from structlog.testing import capture_logs
from typer.testing import CliRunner, Result

from actorflow.cli import EXIT_CODES, app
from actorflow.storage import Codec
from tests.cli.stored import populate

KEY = bytes(range(32))
ENTRY = f"k1:{base64.b64encode(KEY).decode()}"
UNSET = {"ACTORFLOW_KEYS": None, "ACTORFLOW_KEY_FILE": None, "ACTORFLOW_KEY_ID": None}
runner = CliRunner()


def cli(*args: str, **env: str) -> Result:
    with capture_logs():  # the `run_unreadable` warnings, kept out of the JSON on stdout
        return runner.invoke(app, list(args), env={"COLUMNS": "200", **UNSET, **env})


@pytest.fixture
def sealed(tmp_path: Path) -> str:
    """A store whose every object is encrypted with key ``k1``."""
    path = str(tmp_path / "store")
    anyio.run(populate, path, Codec(keys={"k1": KEY}))
    return path


@pytest.fixture
def key_file(tmp_path: Path) -> str:
    path = tmp_path / "keys"
    path.write_text(f"# the store's key\n{ENTRY}\n")
    return str(path)


def _flip(path: Path, offset: int) -> None:
    data = bytearray(path.read_bytes())
    data[offset] ^= 0xFF
    path.write_bytes(bytes(data))


class TestWithoutTheKey:
    def test_runs_lists_each_run_as_encrypted_and_says_how_to_give_the_key(
        self, sealed: str
    ) -> None:
        result = cli("runs", "--store", sealed)
        assert result.exit_code == 0, result.output
        assert "run-a" in result.stdout
        assert "run-b" in result.stdout
        assert result.stdout.count("encrypted") == 2
        assert "2 run(s) shown as encrypted" in result.stderr
        assert "--key-file" in result.stderr
        rows = json.loads(cli("runs", "--store", sealed, "--json").stdout)
        assert [(r["run_id"], r["status"], r["encrypted_with"]) for r in rows] == [
            ("run-a", "encrypted", "k1"),
            ("run-b", "encrypted", "k1"),
        ]
        assert all(r["alive"] is False for r in rows)  # the flock needs no key

    def test_stderr_warns_once_per_missing_key_not_once_per_run(self, sealed: str) -> None:
        env = {k: v for k, v in os.environ.items() if k not in UNSET}
        proc = subprocess.run(
            [sys.executable, "-m", "actorflow", "runs", "--store", sealed],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
            env={**env, "COLUMNS": "200"},
        )
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout.count("encrypted") == 2
        warnings = [line for line in proc.stderr.splitlines() if "run_unreadable" in line]
        assert len(warnings) == 1, proc.stderr
        assert "key_id='k1'" in warnings[0] or "key_id=k1" in warnings[0]
        assert "2 run(s) shown as encrypted" in proc.stderr

    def test_a_filter_cannot_see_sealed_runs_and_says_so(self, sealed: str) -> None:
        result = cli("runs", "--store", sealed, "--status", "completed", "--json")
        assert result.exit_code == 0, result.output
        assert json.loads(result.stdout) == []
        assert "2 run(s) not shown" in result.stderr

    @pytest.mark.parametrize(
        "command",
        [
            ["checkpoints", "run-a"],
            ["show", "run-a", "latest"],
            ["diff", "run-a", "0001"],
            ["compare", "run-a", "run-b"],
            ["log", "run-a"],
            ["result", "run-a"],
            ["prune"],
            ["recover"],  # the keys as the library reads them: none here
        ],
    )
    def test_commands_that_need_plaintext_exit_9_saying_how_to_give_the_key(
        self, sealed: str, command: list[str]
    ) -> None:
        result = cli(*command, "--store", sealed)
        assert result.exit_code == EXIT_CODES["encrypted"] == 9, result.output
        assert "this store is encrypted (key 'k1')" in result.stderr
        assert "--key-file FILE" in result.stderr

    def test_validate_verifies_every_checksum_without_opening_anything(self, sealed: str) -> None:
        result = cli("validate", "--store", sealed)
        assert result.exit_code == 0, result.output
        assert "ok: 2 run(s), 3 log record(s), 3 checkpoint(s), 1 blob(s) checked" in result.stdout
        assert "checked by checksum only, not opened" in result.stdout
        report = json.loads(cli("validate", "--store", sealed, "--json").stdout)
        assert report["ok"] is True
        assert report["sealed"] == 3 + 3 + 1 + 2  # and the two manifests
        one = cli("validate", "run-a", "--store", sealed, "--json")
        assert one.exit_code == 0, one.output
        assert json.loads(one.stdout)["snapshots"] == 3

    def test_validate_names_damage_in_sealed_data_without_the_key(self, sealed: str) -> None:
        [checkpoint] = Path(sealed, "runs", "run-a", "snapshots").glob("000000003_*done*")
        _flip(checkpoint, 100)
        segment = next(Path(sealed, "runs", "run-a", "log").glob("*.seg"))
        _flip(segment, 12 + 40)  # inside the first record's sealed body
        result = cli("validate", "--store", sealed)
        assert result.exit_code == EXIT_CODES["corrupt"], result.output
        assert f"{checkpoint}: sha256 checksum mismatch" in result.stderr
        assert f"{segment} at byte 0" in result.stderr
        assert "2 problem(s)" in result.stdout


class TestWithTheKey:
    def test_key_file_opens_everything(self, sealed: str, key_file: str) -> None:
        runs = json.loads(cli("runs", "--store", sealed, "--key-file", key_file, "--json").stdout)
        assert [(r["run_id"], r["status"]) for r in runs] == [
            ("run-a", "completed"),
            ("run-b", "interrupted"),
        ]
        shown = cli("show", "run-a", "latest", "--store", sealed, "--key-file", key_file)
        assert shown.exit_code == 0, shown.output
        assert json.loads(shown.stdout)["agents"]["researcher-0"]["state"]["score"] == 0.9
        compared = cli("compare", "run-a", "run-b", "--store", sealed, "--key-file", key_file)
        assert compared.exit_code == 0, compared.output
        assert "A run-a: " in compared.stdout
        checked = cli("validate", "--store", sealed, "--key-file", key_file, "--json")
        assert checked.exit_code == 0, checked.output
        assert json.loads(checked.stdout)["sealed"] == 0  # every item opened and decoded
        pruned = cli(
            "prune", "--keep", "1", "--max-age", "1d", "--store", sealed, "--key-file", key_file
        )
        assert pruned.exit_code == 0, pruned.output
        assert "pruned 2 checkpoint(s)" in pruned.stdout

    def test_the_environment_gives_the_key_as_it_does_to_the_library(
        self, sealed: str, key_file: str
    ) -> None:
        for env in ({"ACTORFLOW_KEYS": ENTRY}, {"ACTORFLOW_KEY_FILE": key_file}):
            result = cli("checkpoints", "run-a", "--store", sealed, "--json", **env)
            assert result.exit_code == 0, result.output
            assert len(json.loads(result.stdout)) == 3

    def test_a_wrong_key_exits_9_saying_so(self, sealed: str, tmp_path: Path) -> None:
        wrong = tmp_path / "wrong"
        wrong.write_text(f"k1:{base64.b64encode(os.urandom(32)).decode()}")
        result = cli("log", "run-a", "--store", sealed, "--key-file", str(wrong))
        assert result.exit_code == EXIT_CODES["encrypted"], result.output
        assert "the key is wrong" in result.stderr

    def test_a_bad_key_file_is_bad_usage_and_never_shows_the_key(
        self, sealed: str, tmp_path: Path
    ) -> None:
        secret = base64.b64encode(KEY[:20]).decode()  # 20 bytes: no AES key size
        bad = tmp_path / "[red]keys"
        bad.write_text(f"k1:{secret}")
        result = cli("runs", "--store", sealed, "--key-file", str(bad))
        assert result.exit_code == EXIT_CODES["usage"], result.output
        assert secret not in result.output
        assert "[red]keys" in result.stderr  # the path as it is, never markup
        assert "16, 24 or 32 bytes" in result.stderr
        missing = cli("runs", "--store", sealed, "--key-file", str(tmp_path / "nope"))
        assert missing.exit_code == EXIT_CODES["usage"], missing.output
        assert "a readable key file" in missing.stderr
