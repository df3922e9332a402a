"""``actorflow ui``: serving on both loops, refusing an open address, naming the missing extra."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import urllib.request
from http.cookiejar import CookieJar

import pytest

from tests.ui.serving import ROOT, first_line, serving, stop, ui_process


def _get(url: str) -> str:
    opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(CookieJar()))
    with opener.open(url, timeout=30) as reply:
        body: bytes = reply.read()
    return body.decode()


@pytest.mark.parametrize("loop", ["asyncio", "trio"])
def test_it_prints_one_url_with_its_token_and_serves_the_runs(store_path: str, loop: str) -> None:
    with serving("--store", store_path, "--loop", loop) as url:
        assert "/?token=" in url
        page = _get(url)
        assert "team-trio" in page
        assert "team-asyncio" in page


def test_read_only_prints_a_url_without_token(store_path: str) -> None:
    with serving("--store", store_path, "--read-only") as url:
        assert "token" not in url
        assert "team-trio" in _get(url)


def test_another_address_without_read_only_or_token_file_is_refused(store_path: str) -> None:
    proc = ui_process("--store", store_path, "--host", "0.0.0.0", "--port", "0")
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 2
    text = err.decode()
    assert "--host" in text
    assert "--read-only" in text
    assert "--token-file" in text


def test_a_token_file_is_the_token_of_the_url(store_path: str, tmp_path: object) -> None:
    path = os.path.join(str(tmp_path), "token")
    with open(path, "w") as f:
        f.write("s3cret-token-of-the-team\n")
    proc = ui_process("--store", store_path, "--port", "0", "--token-file", path)
    try:
        assert first_line(proc).endswith("/?token=s3cret-token-of-the-team")
    finally:
        stop(proc)


def test_a_token_file_that_is_a_fifo_is_named_not_read(store_path: str, tmp_path: object) -> None:
    path = os.path.join(str(tmp_path), "token")
    os.mkfifo(path)  # reading it would wait for a writer for ever
    proc = ui_process("--store", store_path, "--port", "0", "--token-file", path)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 2
    assert "a FIFO, not a regular file" in err.decode()


def test_without_the_ui_extra_it_says_which_extra_to_install(store_path: str) -> None:
    code = (
        "import sys; sys.modules['starlette'] = None\n"
        "from actorflow.cli import main\n"
        f"sys.argv = ['actorflow', 'ui', '--store', {store_path!r}]\n"
        "main()\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, env=env, timeout=60, check=False
    )
    assert done.returncode == 1
    assert "pip install 'actorflow[ui]'" in done.stderr.decode()


@pytest.mark.parametrize("loop", ["asyncio", "trio"])
def test_ctrl_c_stops_it_with_one_line_and_the_interrupted_code(store_path: str, loop: str) -> None:
    proc = ui_process("--store", store_path, "--port", "0", "--loop", loop)
    try:
        url = first_line(proc).removeprefix("actorflow ui: ")
        assert "team-trio" in _get(url)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=30)
    finally:
        stop(proc)
    assert proc.returncode == 130
    text = err.decode()
    assert text.strip().splitlines()[-1] == "interrupted"
    assert "Traceback" not in text


@pytest.mark.parametrize("app", [[], ["--app", "tests.ui.live_app:make_runtime"]], ids=str)
def test_a_folder_holding_no_store_is_named_and_left_uncreated(
    tmp_path: object, app: list[str]
) -> None:
    path = os.path.join(str(tmp_path), "nothing-here")
    proc = ui_process("--port", "0", *app, "--store", path)
    try:
        with pytest.raises(RuntimeError, match=f"no actorflow store at {path}"):
            first_line(proc)
        assert proc.returncode == 1
    finally:
        stop(proc)
    assert not os.path.exists(path)
