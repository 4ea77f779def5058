"""bucket-memory beside SlateDB and delta-rs on one moto server behind one latency proxy, in one run.

The proxy (`benchmarks.latency_proxy`, a process of its own) delays every request by 20 ms, like
S3 Standard within a region, and counts requests by method, so the CPU measured here is the
clients' alone. Each system writes one small key at a time, durably (ours: a write returns once
its commit is stored; SlateDB: `await_durable` on the write's handle; delta-rs: an append is a
commit), then a new client opens 10,000 keys and reads one. Figures are medians with min and max
over the writes or rounds. `python -m benchmarks.peers_s3 [--quick]` writes benchmarks/peers_s3.json
and the table between the peers-s3 markers in docs/performance.md.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import statistics
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from a13n_harness.providers.memory import Origin

from benchmarks.latency_proxy import LatencyProxy
from benchmarks.layers import BUCKET, LAYERS, S3Layer
from benchmarks.page import publish
from benchmarks.peers import files, spread
from bucket_memory import LogFileStore, MemoryAdmin
from bucket_memory.testing.emulators import moto_server

ORIGIN = Origin(run_id="bench")
LATENCY = 0.020
KEYS = 10_000
ONE_KEY = "notes/05000.md"


class System:
    """One store under test: how it writes one key durably, seeds many, and opens to read one."""

    name = ""

    async def write(self, number: int) -> None:
        raise NotImplementedError

    async def seed(self) -> None:
        raise NotImplementedError

    async def open_and_read_one(self) -> None:
        raise NotImplementedError

    async def close(self) -> None:
        """Release what `write` opened."""


class Ours(System):
    def __init__(self, layer: str) -> None:
        self.name = f"bucket-memory ({layer})"
        self.layer = layer
        self.writes = self._objects(f"writes/{uuid.uuid4().hex}")
        self.store = LogFileStore(self.writes)
        self.seeded = f"seeded/{uuid.uuid4().hex}"

    def _objects(self, prefix: str) -> S3Layer:
        return LAYERS[self.layer](prefix)

    async def write(self, number: int) -> None:
        await self.store.write(f"new/{number}.md", "a new note\n", expected=None, origin=ORIGIN)

    async def seed(self) -> None:
        objects = self._objects(self.seeded)
        store = LogFileStore(objects, max_bytes=64 * 1024 * 1024)
        await MemoryAdmin(store).put_files(files(KEYS), replace=False, origin=ORIGIN)
        await store.settle()
        await objects.aclose()

    async def open_and_read_one(self) -> None:
        objects = self._objects(self.seeded)
        await LogFileStore(objects, max_bytes=64 * 1024 * 1024).read(ONE_KEY)
        await objects.aclose()

    async def close(self) -> None:
        await self.store.settle()
        await self.writes.aclose()


class SlateDB(System):
    name = "SlateDB 0.17"

    def __init__(self) -> None:
        self.path = f"slatedb/{uuid.uuid4().hex}"
        self.db: Any = None

    async def _open(self, path: str) -> Any:
        from slatedb.uniffi import DbBuilder, ObjectStore

        return await DbBuilder(path, ObjectStore.resolve(f"s3://{BUCKET}")).build()

    async def write(self, number: int) -> None:
        if self.db is None:
            self.db = await self._open(self.path)
        handle = await self.db.put(f"new/{number}.md".encode(), b"a new note\n")
        await handle.await_durable()

    async def seed(self) -> None:
        from slatedb.uniffi import WriteBatch

        db = await self._open(f"{self.path}-seeded")
        batch = WriteBatch()
        for path, text in files(KEYS).items():
            batch.put(path.encode(), text.encode())
        await (await db.write(batch)).await_durable()
        await db.flush()
        await db.shutdown()

    async def open_and_read_one(self) -> None:
        db = await self._open(f"{self.path}-seeded")
        assert await db.get(ONE_KEY.encode()) is not None
        await db.shutdown()

    async def close(self) -> None:
        if self.db is not None:
            await self.db.shutdown()


class DeltaRs(System):
    name = "delta-rs 1.6"

    def __init__(self, endpoint: str) -> None:
        self.uri = f"s3://{BUCKET}/delta/{uuid.uuid4().hex}"
        self.options = {
            "AWS_ENDPOINT_URL": endpoint,
            "AWS_ALLOW_HTTP": "true",
            "AWS_REGION": "us-east-1",
            "AWS_ACCESS_KEY_ID": os.environ["AWS_ACCESS_KEY_ID"],
            "AWS_SECRET_ACCESS_KEY": os.environ["AWS_SECRET_ACCESS_KEY"],
            "conditional_put": "etag",  # commits are create-if-absent PUTs: no lock table
        }

    def _table(self, keys: list[str], values: list[str]) -> Any:
        from arro3.core import Array, DataType, Table

        return Table.from_pydict({"key": Array(keys, DataType.string()), "value": Array(values, DataType.string())})

    async def write(self, number: int) -> None:
        from deltalake import write_deltalake

        table = self._table([f"new/{number}.md"], ["a new note\n"])
        await asyncio.to_thread(write_deltalake, self.uri, table, mode="append", storage_options=self.options)

    async def seed(self) -> None:
        from deltalake import write_deltalake

        seeded = files(KEYS)
        table = self._table(list(seeded), list(seeded.values()))
        await asyncio.to_thread(
            write_deltalake, f"{self.uri}-seeded", table, mode="append", storage_options=self.options
        )

    async def open_and_read_one(self) -> None:
        from deltalake import DeltaTable, QueryBuilder

        def read() -> None:
            table = DeltaTable(f"{self.uri}-seeded", storage_options=self.options)
            query = QueryBuilder().register("notes", table)
            rows = query.execute(f"select value from notes where key = '{ONE_KEY}'").read_all()
            assert rows.num_rows == 1

        await asyncio.to_thread(read)


async def measure(system: System, proxy: LatencyProxy, writes: int, rounds: int) -> dict[str, Any]:
    await system.write(-1)  # opened, and its first commit (creating the table or memory) not measured
    before = await proxy.requests()
    wall, cpu = [], []
    for number in range(writes):
        started, clock = time.perf_counter(), time.process_time()
        await system.write(number)
        wall.append((time.perf_counter() - started) * 1000)
        cpu.append((time.process_time() - clock) * 1000)
    sent = await proxy.requests() - before
    await system.close()
    await system.seed()
    opened = await per_round(system.open_and_read_one, rounds, proxy)
    return {
        "write_ms": spread(wall),
        "write_cpu_ms": spread(cpu),
        "requests_per_write": {method: count / writes for method, count in sorted(sent.items())},
        "open_and_read_one": opened,
    }


async def per_round(work: Callable[[], Awaitable[None]], rounds: int, proxy: LatencyProxy) -> dict[str, Any]:
    cpu, wall, requests = [], [], []
    for _ in range(rounds):
        before = await proxy.requests()
        started, clock = time.perf_counter(), time.process_time()
        await work()
        cpu.append(time.process_time() - clock)
        wall.append(time.perf_counter() - started)
        requests.append(sum((await proxy.requests() - before).values()))
    return {"cpu_s": spread(cpu), "wall_s": spread(wall), "requests": statistics.median(requests)}


async def run(quick: bool) -> dict[str, Any]:
    writes, rounds = (10, 2) if quick else (40, 3)
    with moto_server() as url:
        os.environ.update(
            AWS_ACCESS_KEY_ID="bench",
            AWS_SECRET_ACCESS_KEY="bench",
            AWS_DEFAULT_REGION="us-east-1",
            AWS_REGION="us-east-1",
        )
        os.environ.update(AWS_ENDPOINT_URL=url)
        import botocore.session

        botocore.session.get_session().create_client("s3").create_bucket(Bucket=BUCKET)
        async with LatencyProxy(url, LATENCY) as proxy:
            os.environ.update(AWS_ENDPOINT_URL=proxy.url, AWS_ALLOW_HTTP="true")  # SlateDB reads these
            systems: list[System] = [Ours("aiobotocore"), Ours("obstore"), SlateDB(), DeltaRs(proxy.url)]
            measured = {system.name: await measure(system, proxy, writes, rounds) for system in systems}
    return {
        "machine": f"{platform.processor() or platform.machine()}, {platform.python_version()}",
        "latency_ms": LATENCY * 1000,
        "writes": writes,
        "rounds": rounds,
        "systems": measured,
    }


def _cell(figure: dict[str, float], digits: int = 1) -> str:
    return f"{figure['median']:.{digits}f} ({figure['min']:.{digits}f}-{figure['max']:.{digits}f})"


def tables(results: dict[str, Any]) -> str:
    systems = results["systems"]
    ours = systems["bucket-memory (aiobotocore)"]
    rows = [
        f"### On S3 (moto, {results['latency_ms']:.0f} ms per request): a durable write of one key, and a cold "
        f"open of {KEYS:,} keys reading one",
        "",
        "| | write ms | requests per write | client CPU ms per write | open and read one: CPU s | requests |",
        "|---|---|---|---|---|---|",
    ]
    for name, figures in systems.items():
        requests = figures["requests_per_write"]
        per_method = ", ".join(f"{count:.2f} {method}" for method, count in requests.items())
        opened = figures["open_and_read_one"]
        rows.append(
            f"| {name} | {_cell(figures['write_ms'])} | {sum(requests.values()):.2f} ({per_method}) | "
            f"{_cell(figures['write_cpu_ms'], 2)} | {_cell(opened['cpu_s'], 3)} | {opened['requests']:.0f} |"
        )
    rows += ["", "| ratio to bucket-memory (aiobotocore), medians | write ms | requests | CPU per write | open CPU |"]
    rows.append("|---|---|---|---|---|")
    for name, figures in systems.items():
        rows.append(
            f"| {name} | {figures['write_ms']['median'] / ours['write_ms']['median']:.2f}x | "
            f"{sum(figures['requests_per_write'].values()) / sum(ours['requests_per_write'].values()):.2f}x | "
            f"{figures['write_cpu_ms']['median'] / ours['write_cpu_ms']['median']:.2f}x | "
            f"{figures['open_and_read_one']['cpu_s']['median'] / ours['open_and_read_one']['cpu_s']['median']:.2f}x |"
        )
    rows += [
        "",
        f"{results['writes']} writes each; {results['rounds']} cold opens each. Machine: {results['machine']}.",
    ]
    return "\n".join(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="fewer writes and rounds")
    results = asyncio.run(run(parser.parse_args().quick))
    publish(results, saved_as="peers_s3.json", section="peers-s3", tables=tables(results))


if __name__ == "__main__":
    main()
