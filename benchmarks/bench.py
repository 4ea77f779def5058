"""`make bench`: requests, bytes and latency per operation, contention, scale, and baselines.

Most runs use the in-memory object layer behind `FaultyObjectStore` with a fixed latency per
request (20 ms like S3 Standard, 5 ms like S3 Express), so results translate to real clouds by
their request counts; one run repeats the single-agent operations over real HTTP against a moto
server. Results go to benchmarks/results.json, the tables between the markers in
docs/performance.md, and the plots in docs/img/. Record memory has its own: benchmarks/records.py.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import platform
import random
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from a13n_harness.providers.memory import DirectoryFileStore, FileStore, MemoryStoreError, Origin

from benchmarks.naive import demonstrate_write_skew, naive_request_counts
from benchmarks.page import publish
from benchmarks.stats import percentile
from bucket_memory import LogFileStore, LogOptions, MemoryAdmin
from bucket_memory.objects.interface import Create
from bucket_memory.objects.memory import MemoryObjectStore
from bucket_memory.testing.faults import Faults, FaultyObjectStore

ROOT = Path(__file__).parent.parent
ORIGIN = Origin(run_id="bench")
TEXT = "- a remembered fact about the user's preferences\n" * 20  # about 1 KiB


async def timed(operation: Callable[[], Awaitable[Any]], runs: int) -> list[float]:
    samples = []
    for _ in range(runs):
        started = time.perf_counter()
        await operation()
        samples.append(time.perf_counter() - started)
    return samples


async def seeded(files: int, latency: float) -> tuple[MemoryObjectStore, FaultyObjectStore, LogFileStore]:
    objects = MemoryObjectStore()
    room = max(32 * 1024 * 1024, 2 * files * len(TEXT))  # 50,000 files hold more than the default quota
    seeder = LogFileStore(objects, max_bytes=room)
    await MemoryAdmin(seeder).put_files({f"notes/{i:05}.md": TEXT for i in range(files)}, replace=False, origin=ORIGIN)
    await seeder.settle()  # its checkpoint written before the measured store opens
    counted = FaultyObjectStore(objects, Faults(latency=latency))
    store = LogFileStore(counted, max_bytes=room)
    await store.list()  # warm: the cold start is measured on its own
    return objects, counted, store


async def single_agent(files: int, latency: float, runs: int) -> dict[str, dict[str, float]]:
    """Each operation of one warm, uncontended agent: median and p99 seconds, requests and bytes."""
    _, counted, store = await seeded(files, latency)
    counter = iter(range(10**9))

    async def write() -> None:
        await store.write(f"new/{next(counter)}.md", TEXT, expected=None, origin=ORIGIN)

    async def append() -> None:
        current = await store.read("notes/00001.md")
        await store.write("notes/00001.md", current.text + "x\n", expected=current.version, origin=ORIGIN)

    async def fresh_file() -> str:
        path = f"new/{next(counter)}.md"
        staged[path] = await store.write(path, TEXT, expected=None, origin=ORIGIN)
        return path

    staged: dict[str, str] = {}

    async def move() -> None:
        path, version = staged.popitem()
        await store.move(path, path + ".moved", expected=version, origin=ORIGIN)

    async def delete() -> None:
        path, version = staged.popitem()
        await store.delete(path, expected=version, origin=ORIGIN)

    preparations: dict[str, Callable[[], Awaitable[Any]]] = {"move": fresh_file, "delete": fresh_file}
    operations: dict[str, Callable[[], Awaitable[Any]]] = {
        "read": lambda: store.read("notes/00000.md"),
        "list": store.list,
        "write": write,
        "append (read + write)": append,
        "move": move,
        "delete": delete,
        "search": lambda: store.search("preferences", regex=False, case_sensitive=False, path="notes/", limit=50),
        "changes": lambda: store.changes("1"),
    }
    results: dict[str, dict[str, float]] = {}
    for name, operation in operations.items():
        requests, sent, received, samples = [], [], [], []
        for _ in range(runs):
            if name in preparations:
                await preparations[name]()
            counted.calls.clear()
            counted.bytes_sent = counted.bytes_received = 0
            samples.extend(await timed(operation, 1))
            requests.append(counted.requests)
            sent.append(counted.bytes_sent)
            received.append(counted.bytes_received)
        results[name] = {
            "median_ms": statistics.median(samples) * 1000,
            "p99_ms": percentile(samples, 0.99) * 1000,
            "requests": statistics.mean(requests),
            "bytes": statistics.mean(sent) + statistics.mean(received),
        }
    return results


async def cpu_per_operation(sizes: tuple[int, ...], runs: int) -> dict[str, dict[str, float]]:
    """CPU milliseconds per operation with no injected latency, at each of `sizes` files, and a saved
    profile of each. The sizes take turns, run by run, so that a slow spell of the machine weighs on
    every column alike (measured one size after the other, a column came out twice as slow as it is)."""
    from pyinstrument import Profiler

    counter = iter(range(10**9))
    stores = {files: (await seeded(files, 0.0))[2] for files in sizes}

    def operations(store: LogFileStore) -> dict[str, Callable[[], Awaitable[Any]]]:
        async def write() -> None:
            await store.write(f"new/{next(counter)}.md", TEXT, expected=None, origin=ORIGIN)

        return {
            "write": write,
            "list (after a write)": store.list,
            "list (unchanged)": store.list,
            "read": lambda: store.read("notes/00000.md"),
            "changes": lambda: store.changes("1"),
            "search": lambda: store.search("preferences", regex=False, case_sensitive=False, path="", limit=50),
        }

    cpu: dict[int, dict[str, list[float]]] = {files: {} for files in sizes}
    for _ in range(runs):
        for files, store in stores.items():
            for name, operation in operations(store).items():
                started = time.process_time()
                await operation()
                cpu[files].setdefault(name, []).append(time.process_time() - started)
    for files, store in stores.items():
        profiler = Profiler(async_mode="disabled")
        with profiler:
            for _ in range(runs):
                await operations(store)["write"]()
                await store.list()
        (ROOT / "benchmarks" / f"profile-write-list-{files}-files.txt").write_text(profiler.output_text(unicode=False))
    return {
        str(files): {name: statistics.median(samples) * 1000 for name, samples in by_name.items()}
        for files, by_name in cpu.items()
    }


async def cold_start(files: int, commits: int, latency: float) -> dict[str, float]:
    """A new process opening a memory: requests and seconds, after `commits` commits."""
    objects = MemoryObjectStore()
    writer = LogFileStore(objects)
    if files:
        await MemoryAdmin(writer).put_files(
            {f"notes/{i:05}.md": TEXT for i in range(files)}, replace=False, origin=ORIGIN
        )
    version = await writer.write("counter.md", "0", expected=None, origin=ORIGIN)
    for index in range(commits):
        version = await writer.write("counter.md", str(index), expected=version, origin=ORIGIN)
    # The checkpoint the import made due is written in the background: a cold open before it lands
    # replays the 10 MB import commit (twice the CPU), which the row once measured in some runs.
    await writer.settle()
    counted = FaultyObjectStore(objects, Faults(latency=latency))
    started = time.perf_counter()
    await LogFileStore(counted).list()
    return {
        "seconds": time.perf_counter() - started,
        "requests": counted.requests,
        "gets": counted.calls["get"],
        "lists": counted.calls["list"],
        "bytes": counted.bytes_received,
    }


async def contention(
    writers: int, hot: bool, latency: float, seconds: float, *, one_process: bool = False
) -> dict[str, float]:
    """`writers` agents writing for `seconds`: each with its own store, as separate processes are, or
    (`one_process`) sharing one store, whose concurrent writes then go out as group commits. The one
    serial log (`fleet_commit=False`): `benchmarks/fleet.py` measures fleet commit."""
    objects = MemoryObjectStore()
    if hot:
        await LogFileStore(objects).write("hot.md", "0", expected=None, origin=ORIGIN)
    shared = FaultyObjectStore(objects, Faults(latency=latency))
    stores = [shared if one_process else FaultyObjectStore(objects, Faults(latency=latency)) for _ in range(writers)]
    one_log = LogOptions(fleet_commit=False)
    shared_store = LogFileStore(shared, options=one_log)
    committed, attempts, latencies = 0, 0, []
    deadline = time.perf_counter() + seconds

    async def agent(index: int, counted: FaultyObjectStore) -> None:
        nonlocal committed, attempts
        store = shared_store if one_process else LogFileStore(counted, options=one_log)
        await store.list()
        path = "hot.md" if hot else f"own/{index}.md"
        version: str | None = None if not hot else (await store.read(path)).version
        value = 0
        while time.perf_counter() < deadline:
            started = time.perf_counter()
            while True:
                attempts += 1
                try:
                    version = await store.write(path, str(value), expected=version, origin=ORIGIN)
                    break
                except MemoryStoreError as error:
                    if error.code != "version_mismatch" or error.current is None:
                        raise
                    version = error.current.version
            value += 1
            committed += 1
            latencies.append(time.perf_counter() - started)

    started = time.perf_counter()
    await asyncio.gather(*(agent(i, counted) for i, counted in enumerate(stores)))
    elapsed = time.perf_counter() - started
    creates = sum(counted.calls["create"] for counted in {id(counted): counted for counted in stores}.values())
    return {
        "writers": writers,
        "commits_per_second": committed / elapsed,
        "bound_per_second": 1 / (2 * latency),
        "creates_per_commit": creates / committed,
        "retries_per_write": (attempts - committed) / committed,
        "p50_ms": statistics.median(latencies) * 1000,
        "p99_ms": percentile(latencies, 0.99) * 1000,
    }


async def open_loop(
    writers: int, load: float, latency: float, seconds: float, *, probe_after: float | None = None
) -> dict[str, float]:
    """`writers` agents, each with its own store, whose writes arrive as a Poisson process at `load`
    times the one-log bound in all (one commit per two request latencies), on disjoint files.

    Arrivals do not wait for earlier writes (open loop), as agents in a fleet write when they
    must; latency runs from arrival to acknowledgement. The one serial log (`fleet_commit=False`):
    `benchmarks/fleet.py` measures fleet commit.
    """
    objects = MemoryObjectStore()
    rate = load / (2 * latency) / writers  # arrivals per second per writer
    chance = random.Random(writers * 1000 + int(load * 100))
    counted = [FaultyObjectStore(objects, Faults(latency=latency)) for _ in range(writers)]
    latencies: list[float] = []
    end = time.perf_counter() + seconds

    async def agent(index: int) -> None:
        options = LogOptions(probe_before_write_after=probe_after, fleet_commit=False)
        store = LogFileStore(counted[index], options=options)
        await store.list()
        pending: list[asyncio.Task[None]] = []
        versions: dict[str, str | None] = {}
        serial = 0

        async def write(path: str, arrived: float) -> None:
            versions[path] = await store.write(path, str(arrived), expected=versions.get(path), origin=ORIGIN)
            latencies.append(time.perf_counter() - arrived)

        while time.perf_counter() < end:
            await asyncio.sleep(chance.expovariate(rate))
            serial += 1
            pending.append(asyncio.create_task(write(f"own/{index}/{serial}.md", time.perf_counter())))
        await asyncio.gather(*pending)

    await asyncio.gather(*(agent(index) for index in range(writers)))
    creates = sum(store.calls["create"] for store in counted)
    p99 = percentile(latencies, 0.99)
    return {
        "writers": writers,
        "load": load,
        "probe_after": -1.0 if probe_after is None else probe_after,
        "writes": len(latencies),
        "p50_ms": statistics.median(latencies) * 1000,
        "p99_ms": p99 * 1000,
        "p99_round_trips": p99 / latency,
        "puts_per_write": creates / len(latencies),
    }


async def scale(memories: int, latency: float, seconds: float) -> dict[str, float]:
    """`memories` memories in one bucket, two writers each, in parallel: total commits per second."""
    objects = MemoryObjectStore()  # one bucket; prefixes below keep the memories apart
    committed = 0
    deadline = time.perf_counter() + seconds

    async def writer(memory: int, index: int) -> None:
        nonlocal committed
        store = LogFileStore(FaultyObjectStore(_Prefixed(objects, f"m{memory}/"), Faults(latency=latency)))
        version = None
        path = f"w{index}.md"
        while time.perf_counter() < deadline:
            try:
                version = await store.write(path, str(committed), expected=version, origin=ORIGIN)
                committed += 1
            except MemoryStoreError as error:
                version = error.current.version if error.current else None

    started = time.perf_counter()
    await asyncio.gather(*(writer(memory, index) for memory in range(memories) for index in range(2)))
    return {"memories": memories, "commits_per_second": committed / (time.perf_counter() - started)}


class _Prefixed:
    """One memory's view of a shared in-memory bucket, under a key prefix."""

    ordered_listing = True

    def __init__(self, bucket: MemoryObjectStore, prefix: str) -> None:
        self.bucket, self.prefix = bucket, prefix

    @property
    def location(self) -> str:
        return f"memory://bucket/{self.prefix}"

    async def get(self, key: str) -> bytes | None:
        return await self.bucket.get(self.prefix + key)

    async def put(self, key: str, data: bytes, mode: Create) -> None:
        await self.bucket.put(self.prefix + key, data, mode)

    async def list(self, prefix: str, *, start_after: str | None = None, limit: int | None = None) -> list[Any]:
        after = self.prefix + start_after if start_after is not None else None
        found = await self.bucket.list(self.prefix + prefix, start_after=after, limit=limit)
        return [type(info)(info.key[len(self.prefix) :], info.modified) for info in found]

    async def delete(self, keys: Any) -> None:
        await self.bucket.delete([self.prefix + key for key in keys])

    async def now(self, *, ageing: bool = False) -> float:
        return await self.bucket.now(ageing=ageing)


async def local_baselines(runs: int) -> dict[str, dict[str, float]]:
    """The harness's DirectoryFileStore and our LocalFileStore side by side on one local disk, 50 files."""
    results = {}
    for name, make in (("DirectoryFileStore", DirectoryFileStore), ("LocalFileStore", LogFileStore.local)):
        store: FileStore = make(tempfile.mkdtemp())
        for index in range(50):
            await store.write(f"notes/{index:02}.md", TEXT, expected=None, origin=ORIGIN)
        version = await store.write("f.md", TEXT, expected=None, origin=ORIGIN)

        async def write(store: FileStore = store) -> None:
            nonlocal version
            version = await store.write("f.md", TEXT + str(time.perf_counter()), expected=version, origin=ORIGIN)

        reads = await timed(lambda store=store: store.read("notes/07.md"), runs * 10)  # type: ignore[misc]
        lists = await timed(lambda store=store: store.list(), runs * 10)  # type: ignore[misc]
        writes = await timed(write, runs)
        interleaved = []  # as agents work: a read right after each write
        for _ in range(runs):
            await write()
            interleaved += await timed(lambda store=store: store.read("notes/07.md"), 1)  # type: ignore[misc]
        results[name] = {
            "read_median_ms": statistics.median(reads) * 1000,
            "read_after_write_median_ms": statistics.median(interleaved) * 1000,
            "list_median_ms": statistics.median(lists) * 1000,
            "write_median_ms": statistics.median(writes) * 1000,
            "write_p99_ms": percentile(writes, 0.99) * 1000,
        }
    return results


async def cold_start_cpu(files: int) -> float:
    """CPU seconds of a cold open and list of `files` files that carry frontmatter (no latency)."""
    objects = MemoryObjectStore()
    writer = LogFileStore(objects, options=LogOptions(checkpoint_min_commits=1))
    await MemoryAdmin(writer).put_files(
        {f"notes/{i:05}.md": f"---\ndescription: note {i}\ntags: [tea]\n---\n{TEXT}" for i in range(files)},
        replace=False,
        origin=ORIGIN,
    )
    await writer.write("last.md", "last\n", expected=None, origin=ORIGIN)
    await writer.settle()
    best = float("inf")
    for _ in range(3):
        started = time.process_time()
        await LogFileStore(objects).list()
        best = min(best, time.process_time() - started)
    return best


async def history_walk(latency: float, commits: int = 600) -> dict[str, dict[str, float]]:
    """`log --limit 3` on a memory of `commits` commits, from a fresh store: walking back from the
    head, against reading the whole retained log (what `log` did before)."""
    objects = MemoryObjectStore()
    writer = LogFileStore(objects)
    for n in range(commits):
        await writer.write(
            f"notes/{n % 50:02}.md", f"{TEXT}{n}\n", expected=None if n < 50 else str(n - 49), origin=ORIGIN
        )
    await writer.settle()
    found: dict[str, dict[str, float]] = {}
    ways: dict[str, Callable[[MemoryAdmin], Awaitable[object]]] = {
        "log --limit 3 (walk back from the head)": lambda admin: admin.revisions(limit=3),
        "the whole retained log (before)": lambda admin: admin.history.commits(),
    }
    for name, work in ways.items():
        counted = FaultyObjectStore(objects, Faults(latency=latency))
        started = time.perf_counter()
        await work(MemoryAdmin(LogFileStore(counted)))
        found[name] = {"seconds": time.perf_counter() - started, "requests": counted.requests}
    return found


async def append_heavy(latency: float, appends: int = 1000) -> list[dict[str, float]]:
    """Bytes the log stores per commit for a 60 KiB file appended to `appends` times (4 bytes each),
    with writes stored whole and as edits, and what a cold start then reads."""
    rows: list[dict[str, float]] = []
    for edits in (False, True):
        objects = MemoryObjectStore()
        counted = FaultyObjectStore(objects)
        store = LogFileStore(counted, options=LogOptions(store_edits=edits))
        text = "x" * (60 * 1024 - 1) + "\n"
        version = await store.write("journal.md", text, expected=None, origin=ORIGIN)
        sent_before = counted.bytes_sent
        for _ in range(appends):
            text += "- x\n"
            version = await store.write("journal.md", text, expected=version, origin=ORIGIN)
        await store.settle()
        sent = counted.bytes_sent - sent_before
        cold = FaultyObjectStore(objects, Faults(latency=latency))
        started = time.perf_counter()
        await LogFileStore(cold).read("journal.md")
        rows.append(
            {
                "edits": float(edits),
                "bytes_per_commit": sent / appends,
                "appended_bytes_per_commit": 4.0,
                "total_mb": sent / 2**20,
                "cold_seconds": time.perf_counter() - started,
                "cold_requests": cold.requests,
            }
        )
    return rows


async def lambda_cold(files: int = 10_000) -> dict[str, float]:
    """A fresh process against a moto server, as a Lambda cold start: import, first read, first write, RSS."""
    import os
    import sys

    from bucket_memory import open_store
    from bucket_memory.testing.emulators import moto_server

    with moto_server() as endpoint:
        environment = {
            **os.environ,
            "AWS_ENDPOINT_URL": endpoint,
            "AWS_ACCESS_KEY_ID": "bench",
            "AWS_SECRET_ACCESS_KEY": "bench",
            "AWS_DEFAULT_REGION": "us-east-1",
        }
        os.environ.update(
            {
                key: environment[key]
                for key in ("AWS_ENDPOINT_URL", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_DEFAULT_REGION")
            }
        )
        import botocore.session

        botocore.session.get_session().create_client("s3").create_bucket(Bucket="cold")
        async with open_store("s3://cold/memory") as store:
            await MemoryAdmin(store).put_files(
                {f"notes/{i:05}.md": f"---\ndescription: note {i}\n---\n{TEXT}" for i in range(files)},
                replace=False,
                origin=ORIGIN,
            )
            await store.write("last.md", "last\n", expected=None, origin=ORIGIN)  # then a checkpoint
        child = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "benchmarks.cold_process",
            "s3://cold/memory",
            stdout=asyncio.subprocess.PIPE,
            env=environment,
            cwd=ROOT,
        )
        output, _ = await child.communicate()
        measured: dict[str, float] = json.loads(output)
        return measured


async def http_single_agent(runs: int) -> dict[str, dict[str, float]]:
    """The single-agent operations over real HTTP against a moto server (on this machine)."""
    import os

    from aiobotocore.session import get_session

    from bucket_memory.objects.s3 import S3ObjectStore
    from bucket_memory.testing.emulators import moto_server

    with moto_server() as endpoint:
        os.environ.update(AWS_ACCESS_KEY_ID="bench", AWS_SECRET_ACCESS_KEY="bench", AWS_DEFAULT_REGION="us-east-1")
        async with get_session().create_client("s3", endpoint_url=endpoint) as client:
            await client.create_bucket(Bucket="bench")
            store = LogFileStore(S3ObjectStore(client, bucket="bench", prefix="memory"))
            await MemoryAdmin(store).put_files(
                {f"notes/{i:05}.md": TEXT for i in range(100)}, replace=False, origin=ORIGIN
            )
            version = await store.write("hot.md", "0", expected=None, origin=ORIGIN)

            async def write() -> None:
                nonlocal version
                version = await store.write("hot.md", str(time.perf_counter()), expected=version, origin=ORIGIN)

            operations = {"read": lambda: store.read("notes/00000.md"), "list": store.list, "write": write}
            measured = {
                name: {"median_ms": statistics.median(s) * 1000, "p99_ms": percentile(s, 0.99) * 1000}
                for name, operation in operations.items()
                for s in [await timed(operation, runs)]
            }
            await store.settle()  # housekeeping the writes started, before the client closes
            return measured


def plot(results: dict[str, Any], directory: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    directory.mkdir(parents=True, exist_ok=True)
    figure, (throughput, tail) = plt.subplots(1, 2, figsize=(11, 4))
    for key, label in (("disjoint", "disjoint files"), ("hot", "one hot file"), ("group", "one process, group commit")):
        rows = results["contention"][key]
        throughput.plot([r["writers"] for r in rows], [r["commits_per_second"] for r in rows], "o-", label=label)
        tail.plot([r["writers"] for r in rows], [r["p99_ms"] for r in rows], "o-", label=label)
    bound = results["contention"]["disjoint"][0]["bound_per_second"]
    throughput.axhline(bound, color="grey", linestyle="--", label="bound: 1 commit / 2 requests")
    throughput.axhline(bound / 2, color="grey", linestyle=":", label="half the bound")
    for axis, title, unit in (
        (throughput, "Committed writes per second, one memory", "writes/s"),
        (tail, "p99 write latency", "ms"),
    ):
        axis.set_xscale("log", base=2)
        axis.set_xlabel("concurrent writers")
        axis.set_ylabel(unit)
        axis.set_title(title)
        axis.legend()
    throughput.set_yscale("log")
    tail.set_yscale("log")
    figure.suptitle("20 ms per request (S3 Standard-like)")
    figure.tight_layout()
    figure.savefig(directory / "contention.png", dpi=110)

    figure, axis = plt.subplots(figsize=(8, 4))
    operations = ["read", "list", "write", "append (read + write)", "delete"]
    ours = [results["single"]["1000"][op]["requests"] for op in operations]
    naive = [results["naive"]["requests"][op] for op in operations]
    positions = range(len(operations))
    axis.bar([p - 0.2 for p in positions], ours, width=0.4, label="bucket-memory (log)")
    axis.bar([p + 0.2 for p in positions], naive, width=0.4, label="naive one object per file")
    axis.set_xticks(list(positions), operations)
    axis.set_ylabel("requests per operation")
    axis.set_title("Requests per operation, 1,000 files, a read set of 10 files")
    axis.legend()
    figure.tight_layout()
    figure.savefig(directory / "requests.png", dpi=110)


def tables(results: dict[str, Any]) -> str:
    lines = [
        "### History at 600 commits (20 ms per request; a fresh store)",
        "",
        "| what | seconds | requests |",
        "| --- | ---: | ---: |",
        *(f"| {name} | {row['seconds']:.2f} | {row['requests']:.0f} |" for name, row in results["history"].items()),
        "",
        "### Single agent (20 ms per request; warm store)",
        "",
    ]
    for files, rows in results["single"].items():
        lines += [
            f"**{int(files):,} files**",
            "",
            "| operation | median ms | p99 ms | requests | bytes |",
            "| --- | ---: | ---: | ---: | ---: |",
        ]
        lines += [
            f"| {op} | {r['median_ms']:.1f} | {r['p99_ms']:.1f} | {r['requests']:.1f} | {r['bytes']:,.0f} |"
            for op, r in rows.items()
        ]
        lines.append("")
    sizes = list(results["cpu"])
    lines += [
        "### CPU per operation (no injected latency; median ms)",
        "",
        "| operation | " + " | ".join(f"{int(n):,} files" for n in sizes) + " |",
        "| --- |" + " ---: |" * len(sizes),
    ]
    for operation in results["cpu"][sizes[0]]:
        lines.append(f"| {operation} | " + " | ".join(f"{results['cpu'][n][operation]:.2f}" for n in sizes) + " |")
    lines += [
        "",
        "### Cold start (20 ms per request)",
        "",
        "| memory | seconds | requests | GETs | LISTs | bytes |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    lines += [
        f"| {name} | {r['seconds']:.2f} | {r['requests']} | {r['gets']} | {r['lists']} | {r['bytes']:,} |"
        for name, r in results["cold"].items()
    ]
    lines += ["", "### Contention on one memory (20 ms per request, 4 s each)", ""]
    for key, title in (
        ("disjoint", "disjoint files, one process each"),
        ("hot", "one hot file, read-modify-write, one process each"),
        ("group", "disjoint files, all in one process: group commit"),
    ):
        lines += [
            f"**{title}**",
            "",
            "| writers | writes/s | bound | PUTs per write | retries per write | p50 ms | p99 ms |",
            "| ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
        ]
        lines += [
            f"| {r['writers']} | {r['commits_per_second']:.1f} | {r['bound_per_second']:.1f} "
            f"| {r['creates_per_commit']:.2f} | {r['retries_per_write']:.2f} | {r['p50_ms']:.0f} | {r['p99_ms']:.0f} |"
            for r in results["contention"][key]
        ]
        lines.append("")
    lines += [
        "### Many memories in one bucket (two writers each, 20 ms per request)",
        "",
        "| memories | commits/s |",
        "| ---: | ---: |",
    ]
    lines += [f"| {r['memories']} | {r['commits_per_second']:.1f} |" for r in results["scale"]]
    lines += [
        "",
        "### Local disk baselines (no injected latency, 50 files, one run side by side)",
        "",
        "| store | read median ms | list median ms | write median ms | write p99 ms |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]
    lines += [
        f"| {name} | {r['read_median_ms']:.3f} | {r['list_median_ms']:.3f} | {r['write_median_ms']:.2f} "
        f"| {r['write_p99_ms']:.2f} |"
        for name, r in results["local"].items()
    ]
    directory, ours = results["local"]["DirectoryFileStore"], results["local"]["LocalFileStore"]
    lines += [
        "",
        f"LocalFileStore against DirectoryFileStore: reads {directory['read_median_ms'] / ours['read_median_ms']:.1f}x "
        f"faster ({directory['read_after_write_median_ms'] / ours['read_after_write_median_ms']:.1f}x right after a "
        f"write), lists {directory['list_median_ms'] / ours['list_median_ms']:.1f}x faster, writes "
        f"{ours['write_median_ms'] / directory['write_median_ms']:.2f}x the time.",
        "",
        f"Cold open and list of 10,000 files with frontmatter: {results['cold_cpu']:.2f} s of CPU.",
        "",
        "### A fresh process against moto (a Lambda cold start; 10,000 files with frontmatter)",
        "",
        "| import bucket_memory s | first read s | first write s | process CPU s | peak RSS MB | SDK imported |",
        "| ---: | ---: | ---: | ---: | ---: | --- |",
        "| {import_s:.2f} | {first_read_s:.2f} | {first_write_s:.3f} | {cpu_s:.2f} | {peak_rss_mb:.0f} | {sdk} |".format(  # noqa: E501
            **results["lambda_cold"], sdk="yes" if results["lambda_cold"]["sdk_loaded_by_import"] else "no"
        ),
        "",
        "### Open-loop contention (Poisson arrivals, disjoint files, 20 ms per request)",
        "",
        "Load is the share of the one-log bound (one commit per two request latencies, 25/s).",
        "",
        "| probe before write | writers | load | writes | p50 ms | p99 ms | p99 in latencies | PUTs per write |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
        *(
            f"| {'after ' + str(r['probe_after']) + ' s' if r['probe_after'] >= 0 else 'no'} | {r['writers']} "
            f"| {r['load']:.0%} | {r['writes']} | {r['p50_ms']:.0f} | {r['p99_ms']:.0f} "
            f"| {r['p99_round_trips']:.0f} | {r['puts_per_write']:.2f} |"
            for r in results["open_loop"]
        ),
        "",
        "### Storage of an append-heavy file (60 KiB, 1,000 appends of 4 bytes)",
        "",
        "| writes stored | bytes sent per commit (commits and checkpoints) | bytes appended per commit | total MiB "
        "| cold read s | cold read requests |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
        *(
            f"| {'as edits' if r['edits'] else 'whole'} | {r['bytes_per_commit']:,.0f} "
            f"| {r['appended_bytes_per_commit']:.0f} | {r['total_mb']:.1f} | {r['cold_seconds']:.2f} "
            f"| {r['cold_requests']:.0f} |"
            for r in results["append_heavy"]
        ),
        "",
        "Edits store {:.0f}x fewer bytes per commit.".format(
            results["append_heavy"][0]["bytes_per_commit"] / results["append_heavy"][1]["bytes_per_commit"]
        ),
    ]
    lines += [
        "",
        "### Real HTTP: moto server on this machine (100 files)",
        "",
        "| operation | median ms | p99 ms |",
        "| --- | ---: | ---: |",
    ]
    lines += [f"| {op} | {r['median_ms']:.1f} | {r['p99_ms']:.1f} |" for op, r in results["http"].items()]
    naive = results["naive"]
    lines += [
        "",
        "### The naive alternative: one object per file",
        "",
        "| operation | requests (naive) | requests (bucket-memory) |",
        "| --- | ---: | ---: |",
    ]
    lines += [
        f"| {op} | {n} | {results['single']['1000'][op]['requests']:.1f} |" for op, n in naive["requests"].items()
    ]
    lines += ["", f"Write skew under the naive store: {naive['write_skew']}", ""]
    lines += [f"Machine: {results['machine']}", ""]
    return "\n".join(lines)


async def run(quick: bool) -> dict[str, Any]:
    runs, seconds = (10, 1.0) if quick else (40, 4.0)
    latency = 0.020
    results: dict[str, Any] = {"machine": f"{platform.processor() or platform.machine()}, {platform.python_version()}"}
    results["single"] = {str(n): await single_agent(n, latency, runs) for n in (10, 1000, 10000)}
    results["single_express"] = await single_agent(1000, 0.005, runs)
    results["cpu"] = await cpu_per_operation((1000, 10000, 50000), runs)
    results["cold"] = {
        "10 files, 10 commits": await cold_start(10, 10, latency),
        "1,000 files": await cold_start(1000, 10, latency),
        "10,000 files": await cold_start(10000, 10, latency),
        f"10 files after {'10,000' if quick else '100,000'} commits": await cold_start(
            10, 10_000 if quick else 100_000, latency
        ),
    }
    writer_counts = (1, 4, 16) if quick else (1, 4, 16, 64)
    results["contention"] = {
        key: [await contention(w, key == "hot", latency, seconds) for w in writer_counts] for key in ("disjoint", "hot")
    }
    results["contention"]["group"] = [
        await contention(w, False, latency, seconds, one_process=True) for w in writer_counts
    ]
    results["scale"] = [await scale(m, latency, seconds) for m in (1, 4, 16, 64)]
    results["open_loop"] = [
        await open_loop(w, load, latency, seconds * 2, probe_after=probe)
        for probe in (None, 0.1)
        for w in (4, 16, 64)
        for load in (0.25, 0.5, 0.75)
    ]
    results["history"] = await history_walk(latency)
    results["local"] = await local_baselines(runs)
    results["cold_cpu"] = await cold_start_cpu(10_000)
    results["lambda_cold"] = await lambda_cold()
    results["append_heavy"] = await append_heavy(latency)
    results["http"] = await http_single_agent(runs)
    results["naive"] = {"requests": await naive_request_counts(), "write_skew": await demonstrate_write_skew()}
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="fewer runs, shorter contention rounds")
    quick = parser.parse_args().quick
    results = asyncio.run(run(quick))
    plot(results, ROOT / "docs" / "img")
    publish(results, saved_as="results.json", section="results", tables=tables(results))


if __name__ == "__main__":
    main()
