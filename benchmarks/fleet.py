"""A fleet on one memory, measured: N writers, each its own store, in several OS processes (or one).

Each writer is a `LogFileStore` of its own (as every Lambda or Cloud Run instance is), and the
writers are split over `processes` OS processes against one object store: a local directory,
whose create-only `os.link` is the conditional PUT, every request delayed by an injected latency
(fixed, or lognormal around it) as `FaultyObjectStore` does, and counted. Arrivals are open loop:
each writer's writes are a Poisson process scheduled before the run, and a write's latency runs
from its scheduled arrival to its acknowledgement, so a backlog shows as latency. Writes are to
disjoint files. Where one machine's CPU would be the limit (many writers), the cell raises the
injected latency instead, and says so; `benchmarks/fleet_sim.py` predicts the same table from the
protocol alone, beyond what this machine can drive.

`python -m benchmarks.fleet` runs the table of docs/performance.md; `--records` the record writers'
beside file writers (each a `LogRecordStore` adding short records, which commit through the same fleet).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import random
import resource
import tempfile
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from a13n_harness.providers.memory import MemoryStoreError, Origin

from bucket_memory import LogFileStore, LogOptions, LogRecordStore
from bucket_memory.objects.local import LocalObjectStore
from bucket_memory.testing.faults import Faults, FaultyObjectStore

from . import fleet_sim
from .page import publish
from .stats import percentile

ROOT = Path(__file__).parent.parent
TEXT = "- a remembered fact about the user's preferences\n" * 4
ORIGIN = Origin(run_id="fleet-bench")


@dataclass(frozen=True, slots=True)
class Cell:
    """One row: `writers` stores offered `load` times what one serial log carries (one commit per
    two request latencies), each request taking `latency` seconds (lognormal with `sigma`)."""

    writers: int
    load: float
    latency: float = 0.05
    sigma: float = 0.0
    seconds: float = 60.0
    processes: int = 4
    fleet_commit: bool = True
    records: bool = False

    @property
    def protocol(self) -> str:
        """The row's first column: how the writers commit, what they write, and whether they share
        one OS process (as separate agents in one host do, each with its own store)."""
        return (
            ("fleet commit" if self.fleet_commit else "one log")
            + (", records" if self.records else "")
            + (", one process" if self.processes == 1 and self.writers > 1 else "")
        )

    @property
    def rate(self) -> float:
        """Writes offered per second, by all the writers together."""
        return self.load / (2 * self.latency)


def _worker(root: str, cell: Cell, first: int, count: int, start: float, seed: int, results: Any) -> None:
    results.put(asyncio.run(_writers(root, cell, first, count, start, seed)))


async def _writers(root: str, cell: Cell, first: int, count: int, start: float, seed: int) -> dict[str, Any]:
    chance = random.Random(seed)
    faults = Faults(latency=cell.latency, latency_sigma=cell.sigma)
    options = LogOptions(fleet_commit=cell.fleet_commit)
    counted = [FaultyObjectStore(LocalObjectStore(root), faults, seed=seed * 10_000 + n) for n in range(count)]
    stores = [LogFileStore(objects, options=options) for objects in counted]
    await asyncio.gather(*(store.list() for store in stores))  # warm, as a running instance is
    for objects in counted:
        objects.calls.clear()
    per_writer = cell.rate / cell.writers
    latencies: list[float] = []
    failures: Counter[str] = Counter()
    cpu_before = time.process_time()

    def writer(store: LogFileStore) -> Callable[[str], Awaitable[object]]:
        """How this cell's writer writes through `store`: a file at the path, or a record."""
        if cell.records:
            records = LogRecordStore(store, origin=ORIGIN)
            return lambda path: records.add(TEXT)
        return lambda path: store.write(path, TEXT, expected=None, origin=ORIGIN)

    async def write(commit: Callable[[str], Awaitable[object]], path: str, arrival: float) -> None:
        await asyncio.sleep(max(0.0, arrival - time.time()))
        try:
            await commit(path)
        except MemoryStoreError as error:
            failures[error.code] += 1
            return
        latencies.append(time.time() - arrival)

    tasks = []
    for index, store in enumerate(stores):
        commit = writer(store)
        moment = start
        for number in range(1_000_000):
            moment += chance.expovariate(per_writer)
            if moment >= start + cell.seconds:
                break
            path = f"own/{first + index}/{number}.md"
            tasks.append(asyncio.create_task(write(commit, path, moment)))
    await asyncio.gather(*tasks)
    for store in stores:
        await store.settle()
    calls: Counter[str] = Counter()
    for objects in counted:
        calls.update(objects.calls)
    return {
        "offered": len(tasks),
        "latencies": latencies,
        "failures": dict(failures),
        "calls": dict(calls),
        "cpu": time.process_time() - cpu_before,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


def measure(cell: Cell, seed: int = 1) -> dict[str, Any]:
    """Run one cell in `cell.processes` processes on a fresh memory; the row of the table."""
    context = multiprocessing.get_context("spawn")
    results = context.Queue()
    with tempfile.TemporaryDirectory() as root:
        processes = min(cell.processes, cell.writers)
        start = time.time() + 3.0 + cell.writers / 200  # every process imported and warm by then
        shares = [cell.writers // processes + (1 if n < cell.writers % processes else 0) for n in range(processes)]
        workers = []
        first = 0
        for number, share in enumerate(shares):
            worker = context.Process(
                target=_worker, args=(root, cell, first, share, start, seed * 100 + number, results)
            )
            worker.start()
            workers.append(worker)
            first += share
        parts = [results.get() for _ in workers]
        for worker in workers:
            worker.join()
    latencies = sorted(latency for part in parts for latency in part["latencies"])
    offered = sum(part["offered"] for part in parts)
    calls: Counter[str] = Counter()
    failures: Counter[str] = Counter()
    for part in parts:
        calls.update(part["calls"])
        failures.update(part["failures"])
    served = len(latencies)

    def latencies_at(fraction: float) -> float:
        return percentile(latencies, fraction) / cell.latency if latencies else float("inf")

    return {
        "cell": asdict(cell),
        "offered": offered,
        "offered_per_s": offered / cell.seconds,
        "acknowledged": served,
        "served_share": served / offered if offered else 1.0,
        "failures": dict(failures),
        "p50": latencies_at(0.5),
        "p99": latencies_at(0.99),
        "p999": latencies_at(0.999),
        "puts": calls["create"] / max(served, 1),
        "gets": calls["get"] / max(served, 1),
        "lists": calls["list"] / max(served, 1),
        "deletes": calls["delete"] / max(served, 1),
        "cpu_per_write_ms": 1000 * sum(part["cpu"] for part in parts) / max(served, 1),
        "cpu_share": sum(part["cpu"] for part in parts) / (cell.seconds * 2),
    }


# The cells, each measured where this machine can drive it: at 50 ms a request up to 64
# writers, in four processes and in one (every store in one process shares its decoded commits);
# 256 and 1,000 writers with the latency raised (200 and 500 ms) so that the CPU of the two
# cores is not the limit. The one serial log (`fleet_commit=False`) beside the first cells.
CELLS = [
    Cell(1, 0.25),
    Cell(16, 0.5),
    Cell(64, 2.0),
    Cell(16, 0.5, processes=1),
    Cell(64, 2.0, processes=1),
    Cell(64, 2.0, sigma=0.5),
    Cell(256, 4.0, latency=0.2),
    Cell(1000, 8.0, latency=0.5),
    Cell(16, 0.5, fleet_commit=False),
    Cell(64, 2.0, fleet_commit=False),
]
# Record writers beside file writers, measured in one run: a record is one file's create, through
# the same fleet (`--records`; its own table, so the one above need not be measured again).
RECORD_CELLS = [Cell(16, 0.5), Cell(16, 0.5, records=True), Cell(64, 2.0), Cell(64, 2.0, records=True)]


def predicted(cell: Cell) -> dict[str, Any]:
    """The simulation's row for the cell (the protocol alone: no CPU)."""
    protocol = fleet_sim.Protocol(folding=cell.fleet_commit)
    sim_cell = fleet_sim.Cell(cell.writers, cell.load, cell.seconds, cell.latency, cell.sigma)
    return fleet_sim.simulate(sim_cell, protocol)


def tables(rows: list[dict[str, Any]]) -> str:
    lines = [
        "| protocol | writers | load | latency | acknowledged | p50 | p99 | p99.9 | PUTs | GETs | LISTs | "
        "sim p50 | sim p99 | sim PUTs | sim GETs+LISTs | CPU ms a write |",
        "| --- | ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: "
        "| ---: |",
    ]
    for row in rows:
        cell, sim = row["cell"], row["sim"]
        latency = f"{cell['latency'] * 1000:.0f} ms" + (f" lognormal, sigma {cell['sigma']}" if cell["sigma"] else "")
        failed = sum(row["failures"].values())
        served = f"{row['served_share']:.0%}" + (f" ({failed} failed)" if failed else "")
        lines.append(
            f"| {Cell(**cell).protocol} | {cell['writers']} | {cell['load']:g}x | "
            f"{latency} | {served} | {row['p50']:.1f} | {row['p99']:.1f} | {row['p999']:.1f} | {row['puts']:.2f} | "
            f"{row['gets']:.2f} | {row['lists']:.2f} | {sim['p50']:.1f} | {sim['p99']:.1f} | {sim['puts']:.2f} | "
            f"{sim['gets'] + sim['lists']:.2f} | {row['cpu_per_write_ms']:.1f} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--writers", type=int, help="one cell only (printed, not published)")
    parser.add_argument("--load", type=float, default=0.5)
    parser.add_argument("--latency", type=float, default=0.05)
    parser.add_argument("--sigma", type=float, default=0.0)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--processes", type=int, default=4)
    parser.add_argument("--one-log", action="store_true", help="without fleet commit")
    parser.add_argument("--records", action="store_true", help="record writers (with --writers: one cell)")
    arguments = parser.parse_args()
    if arguments.writers is not None:
        cell = Cell(
            arguments.writers,
            arguments.load,
            arguments.latency,
            arguments.sigma,
            arguments.seconds,
            arguments.processes,
            fleet_commit=not arguments.one_log,
            records=arguments.records,
        )
        print(json.dumps({**measure(cell), "sim": predicted(cell)}, indent=1))
        return
    rows = []
    for cell in RECORD_CELLS if arguments.records else CELLS:
        cell = replace(cell, seconds=arguments.seconds)
        row = {**measure(cell), "sim": predicted(cell)}
        print(json.dumps({key: value for key, value in row.items() if key != "cell"}), flush=True)
        rows.append(row)
    if arguments.records:
        publish({"rows": rows}, saved_as="record_fleet.json", section="record-fleet", tables=tables(rows))
    else:
        publish({"rows": rows}, saved_as="fleet.json", section="fleet", tables=tables(rows))


if __name__ == "__main__":
    main()
