"""Regenerate the inspector's screenshots in docs/inspector/: ``python docs/_screenshots.py``.

It makes a store from real runs (the demo reviewing actorflow's own source,
the human-approval example paused for its answer, a fork with an edit, a run
that crashed and was recovered, runs waiting in queues), serves it with
``actorflow ui``, and photographs each view in Debian's chromium through
Playwright (``apt-get install chromium``; no browser is downloaded).
"""

from __future__ import annotations

import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "docs" / "inspector"
sys.path.insert(0, str(ROOT))

import anyio  # noqa: E402

from actorflow import Runtime  # noqa: E402
from actorflow.storage import FileStore  # noqa: E402
from actorflow.testing import crash_and_recover  # noqa: E402
from tests.runtime.workflow.fork_flow import Ledger  # noqa: E402
from tests.ui.browser import chromium, missing  # noqa: E402
from tests.ui.flows import QUEUES, Team  # noqa: E402
from tests.ui.serving import serving  # noqa: E402

RUN = "review-docs"


def make_store(path: Path) -> None:
    """A store with the demo's run and a run paused for a person's answer."""
    env_run = [sys.executable, "-m", "actorflow"]
    subprocess.run(
        [
            *env_run,
            "demo",
            "--store",
            str(path),
            "--path",
            str(ROOT / "actorflow"),
            "--run-id",
            RUN,
        ],
        check=True,
        cwd=ROOT,
        timeout=600,
        capture_output=True,
    )
    subprocess.run(
        [sys.executable, str(ROOT / "examples" / "human_approval.py"), "start", str(path)],
        check=True,
        cwd=ROOT,
        timeout=600,
        capture_output=True,
    )


async def ledger_and_fork(path: str) -> str:
    """A Ledger run and a fork of it with its clerk's book edited; the checkpoint forked."""
    async with Runtime(store=path) as runtime:
        await runtime.run(Ledger, "first entry", run_id="books")
        opened = next(
            s.snapshot_id
            for s in await runtime.store.list_snapshots("books")
            if s.trigger == "phase_end"
        )
        edit = {"clerk": {"entries": ["carried over"], "prefix": "> ", "pages": 1}}
        fork = await runtime.fork("books", opened, edit=edit, new_run_id="books-edited")
        await fork.result()
    return opened


RECOVERED = "team-recovered"


async def recovered_and_queued(path: str) -> None:
    """A run crashed after a few records and recovered; runs waiting in two queues."""
    outcome = await crash_and_recover(
        Team, ["alpha", "beta", "gamma"], crash_after=4, store=FileStore(path), run_id=RECOVERED
    )
    assert outcome.crashed
    async with Runtime(store=path, queues=QUEUES) as runtime:
        for i, priority in enumerate((0, 5, 5, 0, 10)):
            await runtime.submit(Ledger, f"entry {i}", queue="reviews", priority=priority)
        for i in range(3):
            await runtime.submit(Ledger, f"report {i}", queue="reports")


def main() -> None:
    why = missing()
    if why is not None:
        sys.exit(f"cannot take screenshots: {why}")
    OUT.mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        store = Path(tmp, "store")
        make_store(store)
        opened = anyio.run(ledger_and_fork, str(store))
        anyio.run(recovered_and_queued, str(store))
        app = "tests.ui.flows:make_runtime"
        with serving("--store", str(store), "--app", app) as url, chromium() as browser:
            page = browser.new_page(viewport={"width": 1280, "height": 860})
            page.goto(url)
            base = re.sub(r"(https?://[^/]+).*", r"\1", url)
            shots = {
                "runs": "/",
                "run": f"/runs/{RUN}",
                "decisions": f"/runs/{RUN}/decisions",
                "checkpoints": f"/runs/{RUN}/checkpoints",
                "diff": f"/runs/{RUN}/diff?a=latest~3&b=latest~1",
                "metrics": f"/runs/{RUN}/metrics",
                "waits": "/waits",
                "queues": "/queues",
                "recovered": f"/runs/{RECOVERED}",
                "fork": f"/runs/books/fork?checkpoint={opened}",
                "compare": "/compare?a=books&b=books-edited",
                "health": "/health?check=1",
            }
            for name, path in shots.items():
                page.goto(base + path)
                page.screenshot(path=str(OUT / f"{name}.png"))
                print(f"docs/inspector/{name}.png")
            page.goto(base + "/waits")
            page.locator("a.answer").first.click()
            page.fill("[name='f.value']", "yes")
            page.screenshot(path=str(OUT / "answer.png"))
            print("docs/inspector/answer.png")
            page.goto(base + f"/runs/{RUN}")
            bar = page.locator("#timeline a.bar.kind-ask").nth(5)
            bar.click()
            page.locator("#record .record").wait_for()
            page.locator("#record").scroll_into_view_if_needed()
            page.screenshot(path=str(OUT / "step.png"))
            print("docs/inspector/step.png")
            page.goto(base + f"/runs/{RECOVERED}")
            page.locator("#timeline a.bar.kind-ask.replayed").first.click()
            page.locator("#record .record .provenance").wait_for()
            page.locator("#record").scroll_into_view_if_needed()
            page.screenshot(path=str(OUT / "replayed.png"))
            print("docs/inspector/replayed.png")


if __name__ == "__main__":
    main()
