"""Scale-out benchmark: actorflow on a local three-node Ray cluster, ratios in one run.

Run: ``.venv/bin/python benchmarks/scale.py [--quick]`` (needs the ``ray`` extra).
It starts a ``ray.cluster_utils.Cluster`` on this machine (a head and two
worker nodes, one CPU each; one node has the ``special`` resource placed
agents ask for) and prints:

1. ``ActorRef.ask`` to a placed agent (state ~1 KB) from the driver, against a
   bare Ray actor call to an actor on the same node, interleaved; and
   ``ctx.ask`` to the placed agent from inside a run (its record included);
   ``save_progress`` in a local agent on a host and in a placed agent, whose
   milestones the host records before ``save_progress`` returns.
2. Small runs: in process, then on Ray with one and two hosts (runs/s and
   wall time per run). On a 2-core machine the hosts, the raylets and the
   driver share two cores: the point is the overhead per run, not speed-up.
3. Node loss: a host's node is removed in the middle of its runs; for each
   run it drove, the time from the removal to the run's next task starting
   on a surviving host, with the health-check period and adoption poll that
   bound it (the file store frees a dead owner's claim at once; on S3 add
   the lease TTL).
4. Memory: each host's RSS; a placed-agent Ray actor's RSS empty and with
   N agents in it.
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
import msgspec
import ray
import ray.cluster_utils
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from actorflow import Runtime
from actorflow.ray import RayCluster

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
# the cluster's workers inherit this: they import actorflow from here, _scale_app by name
os.environ["PYTHONPATH"] = os.pathsep.join([str(HERE.parent), str(HERE)])

from _machine import cpu_model  # noqa: E402
from _scale_app import (  # noqa: E402
    AskTimes,
    Beat,
    Heartbeat,
    Notes,
    Ping,
    Pinger,
    SaveJob,
    TimedAsks,
    TimedSaves,
    Tiny,
)

QUICK = "--quick" in sys.argv
N_ASK = 400 if QUICK else 2000
N_RUNS = 200 if QUICK else 1000
N_AGENTS = 200 if QUICK else 1000
N_SAVES = 50 if QUICK else 250
HEALTH = {
    "health_check_initial_delay_ms": 0,
    "health_check_period_ms": 500,
    "health_check_failure_threshold": 3,
}
IMPORTS = ("_scale_app",)


class BareEcho:
    """A bare Ray actor: the baseline for a call."""

    async def ping(self, n: int) -> int:
        return n


def ms(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return 1000 * ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def say(what: str) -> None:
    print(f"[scale] {what}", file=sys.stderr, flush=True)


async def asks(folder: Path, special_node: str) -> list[str]:
    cluster = RayCluster(hosts=1, namespace="bench-ask", imports=IMPORTS)
    try:
        async with Runtime(store=folder / "asks", cluster=cluster) as runtime:
            placer = cluster.placer
            state = msgspec.msgpack.encode(Notes())
            ref: Any = await placer.spawn(Pinger, run_id="bench", name="p", state=state)
            # on the placed agent's node (whose `special` the placed actor holds)
            where = NodeAffinitySchedulingStrategy(special_node, soft=False)
            bare: Any = ray.remote(BareEcho).options(num_cpus=0, scheduling_strategy=where).remote()
            say("asks")
            placed_t: list[float] = []
            bare_t: list[float] = []
            for _ in range(50):  # warm both
                await ref.ask(Ping(0))
                await bare.ping.remote(0)
            for round_ in range(10):  # interleaved rounds: the noise hits both alike
                for n in range(N_ASK // 10):
                    started = time.perf_counter()
                    await ref.ask(Ping(n))
                    placed_t.append(time.perf_counter() - started)
                for n in range(N_ASK // 10):
                    started = time.perf_counter()
                    await bare.ping.remote(n)
                    bare_t.append(time.perf_counter() - started)
                del round_
            say("ctx.ask in a run")
            in_run = await runtime.run(TimedAsks, AskTimes(asks=N_ASK // 4))
            say("memory")
            empty = await placer.memory()
            for i in range(N_AGENTS):
                await placer.spawn(Pinger, run_id="bench", name=f"m{i}", state=state)
            full = await placer.memory()
            hosts = await cluster.host_memory()
    finally:
        await cluster.stop_hosts()
    ratio = ms(placed_t, 0.5) / ms(bare_t, 0.5)
    rows = [
        "| call | p50 ms | p95 ms | vs bare p50 |",
        "|---|---:|---:|---:|",
        f"| bare Ray actor call | {ms(bare_t, 0.5):.3f} | {ms(bare_t, 0.95):.3f} | 1.00x |",
        f"| `ActorRef.ask` to a placed agent (state ~1 KB) | {ms(placed_t, 0.5):.3f} | "
        f"{ms(placed_t, 0.95):.3f} | {ratio:.2f}x |",
        f"| `ctx.ask` to it from a run on a host (durable record) | {ms(in_run, 0.5):.3f} | "
        f"{ms(in_run, 0.95):.3f} | {ms(in_run, 0.5) / ms(bare_t, 0.5):.2f}x |",
        "",
    ]
    (key, before), *_ = empty.items()
    after = full[key]
    rows += [
        "| memory | MB |",
        "|---|---:|",
        *(f"| host {i} RSS | {rss / 2**20:.0f} |" for i, rss in enumerate(hosts)),
        f"| placed-agent Ray actor RSS, 1 agent | {before / 2**20:.0f} |",
        f"| same with {N_AGENTS + 1} agents | {after / 2**20:.0f} |",
        f"| per placed agent (KB) | {(after - before) / N_AGENTS / 1024:.1f} |",
        "",
    ]
    return rows


async def saves(folder: Path) -> list[str]:
    """``save_progress`` in a local agent on a host vs in a placed agent (the host records it).

    A cluster of its own: the placed ``Pinger`` of :func:`asks` holds the
    ``special`` node's one unit until its hosts stop.
    """
    cluster = RayCluster(hosts=1, namespace="bench-saves", imports=IMPORTS)
    local_saves: list[float] = []
    placed_saves: list[float] = []
    try:
        async with Runtime(store=folder / "saves", cluster=cluster) as runtime:
            say("save_progress, local and placed")
            await runtime.run(TimedSaves, SaveJob(saves=10, placed=True))  # start the actor
            for _ in range(4):  # interleaved rounds: the noise hits both alike
                local_saves += await runtime.run(TimedSaves, SaveJob(saves=N_SAVES, placed=False))
                placed_saves += await runtime.run(TimedSaves, SaveJob(saves=N_SAVES, placed=True))
    finally:
        await cluster.stop_hosts()
    ratio = ms(placed_saves, 0.5) / ms(local_saves, 0.5)
    return [
        "| `save_progress` (recorded before it returns) | p50 ms | p95 ms | vs local p50 |",
        "|---|---:|---:|---:|",
        f"| in a local agent on the host | {ms(local_saves, 0.5):.3f} | "
        f"{ms(local_saves, 0.95):.3f} | 1.00x |",
        f"| in a placed agent (the host records it) | {ms(placed_saves, 0.5):.3f} | "
        f"{ms(placed_saves, 0.95):.3f} | {ratio:.2f}x |",
        "",
    ]


async def runs(folder: Path) -> list[str]:
    async def many(runtime: Runtime) -> float:
        started = time.perf_counter()
        handles = [await runtime.start(Tiny, n) for n in range(N_RUNS)]
        for n, handle in enumerate(handles):
            assert await handle.result() == n + 1
        return time.perf_counter() - started

    say("runs in process")
    async with Runtime(store=folder / "inproc") as runtime:
        local = await many(runtime)
    on_ray = []
    for hosts in (1, 2):
        say(f"runs on {hosts} hosts")
        cluster = RayCluster(hosts=hosts, namespace=f"bench-runs-{hosts}", imports=IMPORTS)
        try:
            async with Runtime(store=folder / f"ray{hosts}", cluster=cluster) as runtime:
                on_ray.append(await many(runtime))
        finally:
            await cluster.stop_hosts()
    rows = [
        f"| {N_RUNS} small runs | wall s | runs/s | ms per run | overhead per run vs in-process |",
        "|---|---:|---:|---:|---:|",
        f"| in process (file store) | {local:.2f} | {N_RUNS / local:.0f} | "
        f"{1000 * local / N_RUNS:.2f} | - |",
    ]
    for hosts, wall in zip((1, 2), on_ray, strict=True):
        rows.append(
            f"| Ray, {hosts} host{'s' if hosts > 1 else ''} | {wall:.2f} | {N_RUNS / wall:.0f} | "
            f"{1000 * wall / N_RUNS:.2f} | +{1000 * (wall - local) / N_RUNS:.2f} ms |"
        )
    return [*rows, ""]


async def node_loss(folder: Path, local: Any) -> list[str]:
    side = str(folder / "beats")
    cluster = RayCluster(hosts=2, namespace="bench-loss", imports=IMPORTS)
    head = local.head_node.node_id
    try:
        async with Runtime(store=folder / "loss", cluster=cluster) as runtime:
            victim = next(i for i in cluster.host_info if i.node_id != head)
            job = Beat(steps=60, side=side, pause=0.05)
            handles = [await runtime.start(Heartbeat, job) for _ in range(16)]
            with anyio.fail_after(60):
                while True:  # the victim drives three runs, each under way
                    if len(_beats(side, victim.pid)) >= 3:
                        break
                    await anyio.sleep(0.05)
            node = next(n for n in local.worker_nodes if n.node_id == victim.node_id)
            say("node loss")
            lost_at = time.time()
            local.remove_node(node, allow_graceful=False)
            hosted = _beats(side, victim.pid)
            for handle in handles:
                await handle.result()
    finally:
        await cluster.stop_hosts()
    back = []
    for run_id in hosted:
        later = [
            t
            for key, pid, t in _lines(side)
            if key.startswith(run_id) and pid != victim.pid and t > lost_at
        ]
        back.append(min(later) - lost_at)
    return [
        "| node loss (file store) | runs | p50 s | p95 s | bounded by |",
        "|---|---:|---:|---:|---|",
        f"| removal -> task running again | {len(back)} | {statistics.median(back):.2f} | "
        f"{sorted(back)[int(0.95 * (len(back) - 1))]:.2f} | health check "
        f"{HEALTH['health_check_period_ms']} ms x {HEALTH['health_check_failure_threshold']}, "
        f"adoption poll {cluster.adoption.poll_interval} s; S3: + lease TTL |",
        "",
    ]


def _lines(side: str) -> list[tuple[str, int, float]]:
    with open(side) as f:
        return [(k, int(p), float(t)) for k, p, t in (line.split() for line in f)]


def _beats(side: str, pid: int) -> set[str]:
    try:
        return {key.split("/")[0] for key, p, _ in _lines(side) if p == pid}
    except FileNotFoundError:
        return set()


async def measure(local: Any, special: str) -> list[str]:
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        rows = [*await asks(folder, special), *await saves(folder), *await runs(folder)]
        return [*rows, *await node_loss(folder, local)]


def main() -> None:
    local = ray.cluster_utils.Cluster(
        initialize_head=True,
        head_node_args={"num_cpus": 1, "include_dashboard": False, "_system_config": HEALTH},
    )
    local.add_node(num_cpus=1)
    special = local.add_node(num_cpus=1, resources={"special": 1}).node_id
    local.wait_for_nodes()
    ray.init(address=local.address, log_to_driver=False)
    try:
        rows = anyio.run(measure, local, special)
    finally:
        ray.shutdown()
        local.shutdown()  # type: ignore[no-untyped-call]
    print(f"# scale.py on {cpu_model()}, {os.cpu_count()} cores, ray {ray.__version__}")
    print(f"# asks {N_ASK}, runs {N_RUNS}, placed agents {N_AGENTS}{' (quick)' if QUICK else ''}")
    print("\n".join(rows))


if __name__ == "__main__":
    main()
