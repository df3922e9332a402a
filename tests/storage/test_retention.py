"""Which checkpoints a retention policy keeps: keep-N, max-age, and each phase's end.

A run's phase ends are what ``fork`` starts from: they stay beside the newest
N while the run is younger than ``max_age`` (always without one).
"""

from __future__ import annotations

from actorflow.storage import RetentionPolicy, SnapshotInfo
from actorflow.storage._retention import chosen_snapshots

DAY = 86400.0
RUN_CREATED = 1000.0


def run_of(*triggers: str) -> list[SnapshotInfo]:
    """One snapshot per trigger, a second apart, the first a second after the run began."""
    return [
        SnapshotInfo(
            snapshot_id=f"s{i}",
            position=i,
            phase=f"p{i}",
            trigger=trigger,
            created=RUN_CREATED + 1 + i,
        )
        for i, trigger in enumerate(triggers)
    ]


def kept(policy: RetentionPolicy, snapshots: list[SnapshotInfo], *, age: float) -> list[str]:
    chosen = chosen_snapshots(snapshots, policy, RUN_CREATED + age, run_created=RUN_CREATED)
    return [s.snapshot_id for s in chosen]


LONG_RUN = run_of(*["phase_start", "steps", "phase_end"] * 4, "completed")
PHASE_ENDS = ["s2", "s5", "s8", "s11"]


def test_the_default_keeps_every_phase_end_beside_the_newest_five() -> None:
    assert kept(RetentionPolicy(), LONG_RUN, age=365 * DAY) == sorted(
        {*PHASE_ENDS, "s8", "s9", "s10", "s11", "s12"}, key=lambda s: int(s[1:])
    )


def test_phase_ends_stay_while_the_run_is_younger_than_max_age() -> None:
    policy = RetentionPolicy(keep_last=1, max_age=DAY)
    assert kept(policy, LONG_RUN, age=DAY / 2) == [*PHASE_ENDS, "s12"]
    # older than that, the usual rules apply: every snapshot is too old, but the newest stays
    assert kept(policy, LONG_RUN, age=2 * DAY) == ["s12"]


def test_phase_ends_of_an_old_run_count_like_any_other() -> None:
    policy = RetentionPolicy(keep_last=2, max_age=30 * DAY)
    young_snapshots_of_an_old_run = [
        SnapshotInfo(
            snapshot_id=s.snapshot_id,
            position=s.position,
            phase=s.phase,
            trigger=s.trigger,
            created=RUN_CREATED + 40 * DAY + s.position,
        )
        for s in LONG_RUN
    ]
    assert kept(policy, young_snapshots_of_an_old_run, age=41 * DAY) == ["s11", "s12"]


def test_keep_phase_ends_off_is_keep_last_alone() -> None:
    policy = RetentionPolicy(keep_last=1, keep_phase_ends=False)
    assert kept(policy, LONG_RUN, age=1.0) == ["s12"]


def test_keeps_every_knows_a_run_whose_snapshots_all_stay() -> None:
    from actorflow.storage._retention import keeps_every

    default = RetentionPolicy()
    ends = ["phase_end"] * 12
    assert keeps_every(default, [*ends, "completed"])
    assert keeps_every(default, [])
    # another kind before the newest: kept only while the run has keep_last at most
    assert keeps_every(default, ["interval", "phase_end", "completed"])
    assert not keeps_every(default, ["interval", *ends, "completed"])
    assert keeps_every(RetentionPolicy(keep_last=None), ["interval", *ends])  # keeps all
    # a policy that may drop what the triggers cannot tell: never skipped
    assert not keeps_every(RetentionPolicy(keep_phase_ends=False), [*ends, "completed"])
    assert keeps_every(RetentionPolicy(keep_phase_ends=False), ["phase_end", "completed"])
    assert not keeps_every(RetentionPolicy(max_age=60.0), ["completed"])
    assert not keeps_every(RetentionPolicy(delete_completed=True), ["completed"])
