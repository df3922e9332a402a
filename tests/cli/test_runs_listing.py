"""Where ``runs`` reads a run's phase, activity and owner, on any store.

A store with only the ``Store`` protocol (no optional capability) still gets
an owner (its manifest's) and liveness (``is_owned``); ``validate`` says which
sealed runs it could not check.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from actorflow.cli._render import owner_text, when
from actorflow.runtime.reading import list_runs, run_progress, validate_store
from actorflow.storage import (
    ClaimInfo,
    DecisionRecord,
    MemoryStore,
    PhaseEndRecord,
    RunManifest,
    Snapshot,
    StepRecord,
)
from tests.storage.test_capabilities import ThirdPartyStore

if TYPE_CHECKING:
    from actorflow.storage import Store


def manifest(run_id: str = "r1", owner: str | None = None) -> RunManifest:
    return RunManifest(
        run_id=run_id, workflow="w", input=b"", input_hash="", owner=owner, created=1.0
    )


async def test_the_phase_is_the_newest_step_s_after_the_newest_checkpoint() -> None:
    store = MemoryStore()
    await store.create_run(manifest())
    await store.append("r1", [StepRecord(step_id="a.0/0", kind="ask", time=5.0)])
    await store.write_snapshot(
        Snapshot(run_id="r1", snapshot_id="s1", position=1, created=6.0, trigger="t", phase="a")
    )
    snapshots = await store.list_snapshots("r1")
    assert (await run_progress(store, manifest(), snapshots)).phase == "a"
    await store.append("r1", [PhaseEndRecord(phase_id="a.0", name="a", result=b"\xc0")])
    ended = await run_progress(store, manifest(), snapshots)
    assert (ended.phase, ended.activity) == ("a", 6.0)  # a phase end carries no time
    await store.append(
        "r1",
        [
            StepRecord(step_id="b.0/c.1@1/0", kind="ask", time=7.0),
            DecisionRecord(step_id="b.0/1", agent="lead", type="go", time=8.0),
        ],
    )
    now = await run_progress(store, manifest(), snapshots)
    assert (now.phase, now.activity) == ("b", 8.0)


async def test_a_store_without_capabilities_names_the_manifest_s_owner() -> None:
    store = cast("Store", ThirdPartyStore())  # its methods are set on the class at import
    await store.create_run(manifest(owner="host:5:tag"))
    await store.claim("r1", "host:5:tag")
    runs, sealed = await list_runs(store)
    assert sealed == []
    assert [r.progress.claim for r in runs] == [ClaimInfo(owner="host:5:tag", alive=True)]


async def test_validate_says_which_sealed_runs_a_store_cannot_check() -> None:
    store = cast("Store", ThirdPartyStore())  # its methods are set on the class at import
    await store.create_run(manifest())
    report = await validate_store(store, [], sealed_runs=["r1"])
    assert report.needs_key == ["r1"]
    assert report.ok  # nothing found wrong: the command exits 9, asking for the key


def test_the_owner_cell_says_who_and_whether_alive_with_a_lease_s_deadline() -> None:
    def row(status: str = "running", **claim: object) -> dict[str, object]:
        return {"status": status, "owner": None, "alive": None, "lease_expires": None, **claim}

    assert owner_text(row(owner="vm:12:ab", alive=True)) == "vm:12 [green]alive[/]"
    assert owner_text(row(owner="vm:12:ab", alive=False)) == "vm:12 [red]gone[/]"
    until = when(2e9)
    leased = owner_text(row(owner="vm:12:ab", alive=True, lease_expires=2e9))
    assert leased == f"vm:12 [green]alive[/] (lease until {until})"
    lapsed = owner_text(row(owner="vm:12:ab", alive=False, lease_expires=2e9))
    assert lapsed == f"vm:12 [red]gone[/] (lease ran out {until})"
    assert owner_text(row(owner="[red]x", alive=None)) == "\\[red]x [dim]unknown[/]"
    assert owner_text(row(alive=False)) == "[dim]none[/]"
    assert owner_text(row("completed", owner="vm:12:ab", alive=False)) == "-"
