"""Every program in examples/ runs as a user would run it, in its own process."""

from __future__ import annotations

import collections
import importlib.util
import json
import os
import re
import sys
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from tests import forkserver

if TYPE_CHECKING:
    from tests.storage.s3_servers import S3Server

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
TIMEOUT = 120  # seconds; a bound on a hung example, far above their run time


def run(*args: str, env: dict[str, str] | None = None, cwd: Path | None = None) -> str:
    """Run a Python program; return its output, failing with its stderr if it fails."""
    proc = forkserver.run(
        [sys.executable, *args],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        env={**os.environ, **(env or {})},
        cwd=cwd,
        check=False,
    )
    assert proc.returncode == 0, f"{args} failed:\n{proc.stdout}\n{proc.stderr}"
    return str(proc.stdout)


def load(name: str) -> Any:
    """Import an example as a module (examples/ is not a package)."""
    spec = importlib.util.spec_from_file_location(f"example_{name}", EXAMPLES / f"{name}.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_counter(tmp_path: Path) -> None:
    assert "ran on asyncio and trio" in run(str(EXAMPLES / "counter.py"))


def test_research_team_revises_until_the_critic_is_confident(tmp_path: Path) -> None:
    out = run(str(EXAMPLES / "research_team.py"), str(tmp_path))
    assert "asyncio: accepted after 4 round(s), confidence 1.0" in out
    assert "trio: accepted after 4 round(s), confidence 1.0" in out
    runs = json.loads(run("-m", "actorflow", "runs", "--store", str(tmp_path), "--json"))
    assert [r["status"] for r in runs] == ["completed", "completed"]
    log = run("-m", "actorflow", "log", runs[0]["run_id"], "--store", str(tmp_path), "--json")
    decisions = [d["type"] for d in map(json.loads, log.splitlines()) if d["tag"] == "decision"]
    assert decisions == ["revise", "revise", "revise", "accept"]


def test_human_approval_pauses_and_resumes_from_another_process(tmp_path: Path) -> None:
    store = str(tmp_path)
    out = run(str(EXAMPLES / "human_approval.py"), "start", store)
    assert "paused: apply 3 step(s) to checkout" in out
    paused = json.loads(
        run("-m", "actorflow", "runs", "--status", "paused", "--store", store, "--json")
    )
    assert [r["run_id"] for r in paused] == ["rollout-checkout"]
    # a second process, through the CLI, with the example as the app
    resumed = run(
        "-m",
        "actorflow",
        "resume",
        "rollout-checkout",
        "--response",
        "yes",
        "--app",
        "human_approval:make_runtime",
        "--store",
        store,
        "--json",
        cwd=EXAMPLES,
    )
    outcome = json.loads(resumed)
    assert outcome["status"] == "completed"
    assert outcome["result"]["approved"] is True
    assert outcome["result"]["applied"] == [f"scale checkout to {n}" for n in (1, 2, 3)]


def test_map_reduce_counts_words_like_a_counter(tmp_path: Path) -> None:
    example = load("map_reduce")
    words = re.findall(r"[a-z']+", example.CORPUS.lower())
    top = sorted(collections.Counter(words).items(), key=lambda kv: (-kv[1], kv[0]))[:5]
    out = run(str(EXAMPLES / "map_reduce.py"), str(tmp_path))
    assert f"asyncio {top}" in out
    assert f"trio {top}" in out


def test_fork_reprices_without_redoing_the_research(tmp_path: Path) -> None:
    out = run(str(EXAMPLES / "fork_checkpoint.py"), str(tmp_path))
    assert "original: 12.99 (cautious)" in out
    assert "fork:     10.5 (aggressive)" in out
    assert "market research ran 1 time(s)" in out


@pytest.mark.slow
def test_s3_run_crashed_in_one_process_is_recovered_by_another(moto_server: S3Server) -> None:
    url = f"s3://{moto_server.bucket}/examples-{uuid.uuid4().hex[:8]}"
    env = {
        "AWS_ENDPOINT_URL": moto_server.url,
        "AWS_ACCESS_KEY_ID": moto_server.access_key,
        "AWS_SECRET_ACCESS_KEY": moto_server.secret_key,
        "AWS_DEFAULT_REGION": "us-east-1",
    }
    crashed = forkserver.run(
        [sys.executable, str(EXAMPLES / "s3_recovery.py"), "start", url],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        env={**os.environ, **env, "CRASH_AFTER": "3"},
        check=False,
    )
    assert crashed.returncode == 9, crashed.stderr
    assert "crashing after 3 images" in crashed.stdout
    out = run(str(EXAMPLES / "s3_recovery.py"), "recover", url, env=env)
    match = re.search(r"recovered: 6 thumbnails, (\d+) step\(s\) replayed", out)
    assert match, out
    assert int(match.group(1)) >= 3  # the three resized images came from the log
    # the CLI reads the same S3 store
    runs = json.loads(run("-m", "actorflow", "runs", "--store", url, "--json", env=env))
    assert [(r["run_id"], r["status"]) for r in runs] == [("thumbnails", "completed")]
    assert run("-m", "actorflow", "validate", "--store", url, env=env).startswith("ok")


def test_the_streaming_assistant_streams_tokens_and_takes_a_correction_from_elsewhere(
    tmp_path: Path,
) -> None:
    out = run(str(EXAMPLES / "streaming_assistant.py"), str(tmp_path / "store"))
    assert "[corrector] sent a correction" in out
    assert "[assistant] final: Tides follow the moon;" in out
    assert out.rstrip().endswith("cite the 2024 survey.")
    # the tokens streamed as they came: the draft's words, before the final line
    assert out.index("two tides a day.") < out.index("[assistant] final")
