"""A memory per end user, measured: 1, 1,000 and 10,000 memories of one file each in one bucket,
and what creating one more, opening one, listing them, verifying them all and destroying one cost
in requests and time; and what 1,000 memories open at once in one process hold (RSS, sockets).

Two backends, each cell saying which: moto behind the fault proxy in a process of its own (every
request delayed `LATENCY` and counted there), for 1 and 1,000 memories and the open memories; the
versioned in-memory bucket with the same latency injected and counted (`FaultyObjectStore`), for
all three sizes (10,000 memories on moto would take this machine's two cores longer than a bench
run may). The memories are one seeded memory's objects copied under each prefix, so the bucket
fills in seconds; the work measured on them runs through the library, and `verify --all`'s fan-out
(`each_of`) at `CONCURRENCY`. `python -m benchmarks.memories [--quick]` writes
benchmarks/memories.json and the table between the memories markers in docs/performance.md.
"""

from __future__ import annotations

import argparse
import asyncio
import bisect
import contextlib
import os
import time
from collections.abc import Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager, AsyncExitStack
from pathlib import Path
from typing import Any

from a13n_harness.providers.memory import Origin

from benchmarks.latency_proxy import LatencyProxy
from benchmarks.page import publish
from bucket_memory import LogFileStore, MemoryAdmin, open_store
from bucket_memory.connect import find_memories, memory_prefixes
from bucket_memory.destroy import Destroyer
from bucket_memory.fanout import each_of
from bucket_memory.objects.interface import OVERWRITE, PutMode
from bucket_memory.testing.emulators import moto_server
from bucket_memory.testing.faults import Faults, FaultyObjectStore
from bucket_memory.testing.prefixed import PrefixedObjectStore
from bucket_memory.testing.versioned import VersionedMemoryObjectStore

ORIGIN = Origin(run_id="bench-memories", principal_id="user")
LATENCY = 0.02  # seconds a request, as `make bench` takes for S3 in one region
CONCURRENCY = 64  # memories verified at once (the CLI's --concurrency allows 1 to 64)
BUCKET = "bench-memories"
PROFILE = "- prefers short answers\n- works in Lisbon\n"

type Opened = Callable[[str], AbstractAsyncContextManager[LogFileStore]]


class Backend:
    """Where the memories live: how a memory under `users/` is opened, how the bucket is listed,
    and the requests sent so far."""

    name: str
    opened: Opened
    verify_at_most = 1_000_000  # memories verify-all checks (the first ones listed)

    async def requests(self) -> int:
        raise NotImplementedError

    async def listed(self) -> list[str]:
        raise NotImplementedError


class IndexedBucket(VersionedMemoryObjectStore):
    """The versioned in-memory bucket, its keys kept sorted between changes, so that a listing under
    a prefix costs what S3's does rather than a sort of every key in the bucket (which, at 10,000
    memories, was nearly all of the run's CPU and would be charged to the library). Each listing runs
    the bucket's own, on the keys under the prefix alone (none of them awaits: nothing interleaves)."""

    def __init__(self) -> None:
        super().__init__("bench")
        self._keys: list[str] | None = None  # sorted, every key ever stored; None after a change

    def _under(self, prefix: str) -> list[str]:
        if self._keys is None:
            self._keys = sorted(self.stored)
        start, end = bisect.bisect_left(self._keys, prefix), bisect.bisect_left(self._keys, prefix + "\U0010ffff")
        return self._keys[start:end]

    async def _scoped[T](self, prefix: str, listing: Callable[[], Awaitable[T]]) -> T:
        keys, whole_objects, whole_stored = self._under(prefix), self.objects, self.stored
        self.objects = {key: whole_objects[key] for key in keys if key in whole_objects}
        self.stored = {key: whole_stored[key] for key in keys}
        try:
            return await listing()
        finally:
            self.objects, self.stored = whole_objects, whole_stored

    async def list(self, prefix: str, *, start_after: str | None = None, limit: int | None = None) -> Any:
        return await self._scoped(
            prefix, lambda: super(IndexedBucket, self).list(prefix, start_after=start_after, limit=limit)
        )

    async def list_rolled(self, prefix: str, delimiter: str, *, token: str | None = None) -> Any:
        return await self._scoped(
            prefix, lambda: super(IndexedBucket, self).list_rolled(prefix, delimiter, token=token)
        )

    async def list_versions(self, prefix: str) -> Any:
        return await self._scoped(prefix, lambda: super(IndexedBucket, self).list_versions(prefix))

    async def list_stored(self, prefix: str) -> Any:
        return await self._scoped(prefix, lambda: super(IndexedBucket, self).list_stored(prefix))

    async def has_past(self, prefix: str) -> bool:
        return bool(self._under(prefix))

    async def put(self, key: str, data: bytes, mode: PutMode) -> None:
        self._keys = None
        await super().put(key, data, mode)

    async def delete(self, keys: Sequence[str]) -> None:
        self._keys = None
        await super().delete(keys)

    async def delete_version(self, key: str, version: str) -> None:
        self._keys = None
        await super().delete_version(key, version)


class InMemory(Backend):
    def __init__(self) -> None:
        self.name = "in-memory bucket"
        self.bucket = IndexedBucket()
        self.counted = FaultyObjectStore(self.bucket, Faults(latency=LATENCY))
        self.opened = lambda memory: LogFileStore(PrefixedObjectStore(self.counted, memory + "/"))

    async def requests(self) -> int:
        return self.counted.requests

    async def listed(self) -> list[str]:
        return await memory_prefixes(self.counted)

    async def seed(self, memories: int) -> None:
        template = await _template(lambda: LogFileStore(PrefixedObjectStore(self.bucket, "template/")))
        for key, data in template.items():
            for number in range(memories):
                await self.bucket.put(f"users/{number:05d}/{key}", data, OVERWRITE)
        for key in template:
            await self.bucket.delete_stored(await self.bucket.list_stored(f"template/{key}"))


class Moto(Backend):
    def __init__(self, proxy: LatencyProxy, bucket: str) -> None:
        self.name = "moto"
        self.proxy, self.bucket = proxy, bucket
        # moto served 42 requests a second to verify-all on the shared 2 cores: 1,000 memories took
        # 283 s of a bench run, so verify-all on moto checks the first 100 (the per-memory cost is
        # what the goal compares; the in-memory rows verify them all).
        self.verify_at_most = 100
        self.opened = lambda memory: open_store(f"s3://{bucket}/{memory}")

    async def requests(self) -> int:
        return sum((await self.proxy.requests()).values())

    async def listed(self) -> list[str]:
        return [url.removeprefix(f"s3://{self.bucket}/") for url in await find_memories(f"s3://{self.bucket}/users")]

    async def seed(self, memories: int, upstream: str) -> None:
        import botocore.session

        template = await _template(lambda: self.opened("template"))
        client = botocore.session.get_session().create_client("s3", endpoint_url=upstream)  # not through the proxy

        def put(number: int) -> None:
            for key, data in template.items():
                client.put_object(Bucket=self.bucket, Key=f"users/{number:05d}/{key}", Body=data)

        await asyncio.gather(*(asyncio.to_thread(put, number) for number in range(memories)))


async def _template(opened: Callable[[], AbstractAsyncContextManager[LogFileStore]]) -> dict[str, bytes]:
    """The objects of a memory of one file, as its first writer left them, keyed under the memory."""
    async with opened() as store:
        await store.write("profile.md", PROFILE, expected=None, origin=ORIGIN)
        await store.settle()
        objects = store.objects
        found = {info.key: await objects.get(info.key) for info in await objects.list("")}
    return {key: data for key, data in found.items() if data is not None}


async def timed(backend: Backend, work: Callable[[], Awaitable[object]]) -> dict[str, float]:
    before, started = await backend.requests(), time.perf_counter()
    await work()
    return {"seconds": time.perf_counter() - started, "requests": await backend.requests() - before}


async def operations(backend: Backend, memories: int) -> dict[str, Any]:
    """Each operation's requests and wall time on a bucket of `memories` memories."""
    found: list[str] = []

    async def create() -> None:
        async with backend.opened("users/new") as store:
            await store.write("profile.md", PROFILE, expected=None, origin=ORIGIN)

    async def open_one() -> None:
        async with backend.opened(f"users/{memories // 2:05d}") as store:
            assert (await store.read("profile.md")).text == PROFILE

    async def listing() -> None:
        found.extend(await backend.listed())

    async def verify_all() -> None:
        verified = found[: backend.verify_at_most]
        outcomes = await each_of(verified, backend.opened, lambda admin: admin.verify(), concurrency=CONCURRENCY)
        assert all(outcome.result == [] for outcome in outcomes), [o for o in outcomes if o.result != []][:3]

    async def verify_one() -> None:
        async with backend.opened(f"users/{memories // 2:05d}") as store:
            assert await MemoryAdmin(store).verify() == []

    async def destroy() -> None:
        async with backend.opened("users/new") as store:
            await Destroyer(store.objects).destroy()

    measured = {"create": await timed(backend, create), "open": await timed(backend, open_one)}
    measured["list"] = await timed(backend, listing)
    assert len(found) == memories + 1, (len(found), memories)
    measured["verify_all"] = {**await timed(backend, verify_all), "memories": min(len(found), backend.verify_at_most)}
    measured["verify_one"] = await timed(backend, verify_one)  # every memory is alike: the sum is N+1 of it
    measured["destroy"] = await timed(backend, destroy)
    return {"backend": backend.name, "memories": memories, **measured}


async def in_memory(memories: int) -> dict[str, Any]:
    backend = InMemory()
    await backend.seed(memories)
    return await operations(backend, memories)


def _rss_mb() -> float:
    status = Path("/proc/self/status").read_text()
    return int(next(line.split()[1] for line in status.splitlines() if line.startswith("VmRSS:"))) / 1024


def _sockets() -> int:
    found = 0
    for fd in os.listdir("/proc/self/fd"):
        with contextlib.suppress(FileNotFoundError):  # the listing's own descriptor, closed by now
            found += os.readlink(f"/proc/self/fd/{fd}").startswith("socket:")
    return found


async def held_open(backend: Moto, memories: int) -> dict[str, float]:
    """`memories` stores open at once in this process, each having read its file (a warm store per
    user, as a SaaS agent keeps them): what they add to RSS, and the sockets the process holds, at
    most while they read (sampled every 10 ms) and once they have."""
    rss, sockets = _rss_mb(), _sockets()
    semaphore = asyncio.Semaphore(CONCURRENCY)
    peak = 0
    reading = True

    async def sample() -> None:
        nonlocal peak
        while reading:
            peak = max(peak, _sockets() - sockets)
            await asyncio.sleep(0.01)

    async with AsyncExitStack() as stack:
        stores = [await stack.enter_async_context(backend.opened(f"users/{n:05d}")) for n in range(memories)]

        async def read(store: LogFileStore) -> None:
            async with semaphore:
                await store.read("profile.md")

        sampler = asyncio.create_task(sample())
        await asyncio.gather(*(read(store) for store in stores))
        reading = False
        await sampler
        return {
            "memories": memories,
            "rss_mb": _rss_mb() - rss,
            "rss_total_mb": _rss_mb(),
            "sockets_peak": peak,
            "sockets": _sockets() - sockets,
        }


async def on_moto(sizes: list[int]) -> tuple[list[dict[str, Any]], dict[str, float]]:
    """The operations on moto at each size (a bucket each), and the largest size's memories held open."""
    rows: list[dict[str, Any]] = []
    opened: dict[str, float] = {}
    with moto_server() as upstream:
        os.environ.update(AWS_ACCESS_KEY_ID="bench", AWS_SECRET_ACCESS_KEY="bench", AWS_DEFAULT_REGION="us-east-1")
        import botocore.session

        client = botocore.session.get_session().create_client("s3", endpoint_url=upstream)
        async with LatencyProxy(upstream, LATENCY) as proxy:
            os.environ["AWS_ENDPOINT_URL"] = proxy.url
            for memories in sizes:
                backend = Moto(proxy, f"{BUCKET}-{memories}")
                client.create_bucket(Bucket=backend.bucket)
                client.put_bucket_versioning(Bucket=backend.bucket, VersioningConfiguration={"Status": "Enabled"})
                await backend.seed(memories, upstream)
                rows.append(await operations(backend, memories))
                print(rows[-1], flush=True)
            opened = await held_open(backend, max(sizes))
    return rows, opened


def tables(results: dict[str, Any]) -> str:
    header = (
        f"### Memories of one file each in one bucket ({results['latency_ms']:.0f} ms a request; verify-all "
        f"{results['concurrency']} memories at once): requests, and seconds"
    )
    lines = [
        header,
        "",
        "| backend | memories | create #N+1 | open + read one | list | verify-all | verify-all, a memory "
        "| list + verify-all against the memories' own verify | destroy one |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for row in results["rows"]:
        cells = [f"{row[name]['requests']} ({row[name]['seconds']:.2f} s)" for name in ("create", "open", "list")]
        verify = row["verify_all"]
        each = verify["memories"]  # all of them with the one created, or the first 100 on moto
        sample = "" if each == row["memories"] + 1 else f", the first {each:,}"
        cells.append(f"{verify['requests']} ({verify['seconds']:.2f} s{sample})")
        per_memory = f"{verify['requests'] / each:.1f} ({verify['seconds'] / each * 1000:.1f} ms)"
        ratio = (row["list"]["requests"] + verify["requests"]) / (each * row["verify_one"]["requests"])
        destroy = f"{row['destroy']['requests']} ({row['destroy']['seconds']:.2f} s)"
        cells += [per_memory, f"{ratio:.4f}x", destroy]
        lines.append(f"| {row['backend']} | {row['memories']:,} | {' | '.join(cells)} |")
    held = results["held_open"]
    lines += [
        "",
        f"### {held['memories']:,} memories open at once in one process (moto; each has read its file)",
        "",
        "| RSS added | RSS of the process | sockets added, at most while reading | sockets added, after |",
        "| ---: | ---: | ---: | ---: |",
        f"| {held['rss_mb']:.1f} MB | {held['rss_total_mb']:.0f} MB | {held['sockets_peak']} | {held['sockets']} |",
    ]
    return "\n".join(lines)


async def run(quick: bool) -> dict[str, Any]:
    moto_sizes, memory_sizes = ([1, 100], [1, 100, 1000]) if quick else ([1, 1000], [1, 1000, 10_000])
    rows, held = await on_moto(moto_sizes)
    for memories in memory_sizes:
        rows.append(await in_memory(memories))
        print(rows[-1], flush=True)
    return {"latency_ms": LATENCY * 1000, "concurrency": CONCURRENCY, "rows": rows, "held_open": held}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="100 memories on moto, 1,000 in memory; not published")
    quick = parser.parse_args().quick
    results = asyncio.run(run(quick))
    if quick:
        print(tables(results))
        return
    publish(results, saved_as="memories.json", section="memories", tables=tables(results))


if __name__ == "__main__":
    main()
