"""Fork from an old checkpoint: keep the expensive research, try another decision.

The first run researches the market (slow, costly: think model calls) and then
prices the product with a cautious strategy. Then the strategy changes, and a
fork of the run from the checkpoint taken when research ended prices it again:
the fork restores the research from the checkpoint instead of redoing it, and
only the pricing runs live. The original run is left as it was.

Run it with ``python examples/fork_checkpoint.py [STORE]``.
"""

from __future__ import annotations

import sys
import tempfile

import anyio
import msgspec

from actorflow import Orchestrator, Request, RunContext, Runtime, Specialist, handler, phase
from actorflow.storage import read_full_snapshot


class Strategy(msgspec.Struct):
    """How the strategist prices; the example changes it between the run and the fork."""

    name: str = "cautious"
    margin: float = 0.10


STRATEGY = Strategy()
RESEARCH_CALLS = {"count": 0}


class Product(Request["Market"], frozen=True):
    name: str
    cost: float


class Market(msgspec.Struct, frozen=True):
    competitor_prices: list[float]


class PriceRequest(Request["Price"], frozen=True):
    product: Product
    market: Market


class Price(msgspec.Struct, frozen=True):
    amount: float
    strategy: str


class Analyst(Specialist):
    @handler
    async def research(self, product: Product) -> Market:
        RESEARCH_CALLS["count"] += 1  # the expensive part we do not want to repeat
        return Market([round(product.cost * f, 2) for f in (1.3, 1.45, 1.6)])


class Strategist(Specialist):
    @handler
    async def price(self, req: PriceRequest) -> Price:
        floor = req.product.cost * (1 + STRATEGY.margin)
        cheapest = min(req.market.competitor_prices)
        amount = max(floor, cheapest - 0.01) if STRATEGY.name == "cautious" else floor
        return Price(round(amount, 2), STRATEGY.name)


class Pricing(Orchestrator):
    @phase
    async def research(self, ctx: RunContext, product: Product) -> Market:
        analyst = await ctx.spawn(Analyst, name="analyst")
        market: Market = await ctx.ask(analyst, product)
        return market

    @phase
    async def decide_price(self, ctx: RunContext, product: Product, market: Market) -> Price:
        strategist = await ctx.spawn(Strategist, name="strategist")
        price: Price = await ctx.ask(strategist, PriceRequest(product, market))
        await ctx.decide(
            "price",
            description=f"{product.name} at {price.amount}",
            rationale=f"{price.strategy} strategy against {market.competitor_prices}",
            alternatives=["cautious", "aggressive"],
        )
        return price

    async def run(self, ctx: RunContext, product: Product) -> Price:
        market = await self.research(ctx, product)
        return await self.decide_price(ctx, product, market)


async def first_checkpoint_after(runtime: Runtime, run_id: str, phase_name: str) -> str:
    """The oldest checkpoint of ``run_id`` in which phase ``phase_name`` has finished."""
    for info in await runtime.store.list_snapshots(run_id):
        # whole: as stored, a snapshot names settled phases in its log and history
        snapshot = await read_full_snapshot(runtime.store, run_id, info.snapshot_id)
        if any(done.name == phase_name for done in snapshot.phases.values()):
            return info.snapshot_id
    raise LookupError(f"no checkpoint of {run_id} after phase {phase_name}")


async def main(store: str) -> tuple[Price, Price, int]:
    async with Runtime(store=store) as runtime:
        first: Price = await runtime.run(Pricing, Product("widget", 10.0), run_id="pricing")
        after_research = await first_checkpoint_after(runtime, "pricing", "research")
        STRATEGY.name, STRATEGY.margin = "aggressive", 0.05
        fork = await runtime.fork("pricing", after_research)
        second: Price = await fork.result()
    return first, second, RESEARCH_CALLS["count"]


if __name__ == "__main__":
    folder = sys.argv[1] if len(sys.argv) > 1 else tempfile.mkdtemp(prefix="actorflow-")
    original, forked, calls = anyio.run(main, folder)
    print(f"original: {original.amount} ({original.strategy})")
    print(f"fork:     {forked.amount} ({forked.strategy})")
    print(f"market research ran {calls} time(s)")
