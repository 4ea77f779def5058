"""Erase in `make bench`: the time, requests and CPU of erasing one file from a memory of 1,000
commits, on a versioned in-memory bucket with a fixed latency per request (as `bench` measures
everything else), and what it rewrote and deleted.

`python -m benchmarks.erase [--quick]` writes benchmarks/erase.json and the tables between the
erase markers in docs/performance.md.
"""

from __future__ import annotations

import argparse
import asyncio
import platform
import statistics
import time
from typing import Any

from a13n_harness.providers.memory import Origin

from benchmarks.page import publish
from bucket_memory import LogFileStore, MemoryAdmin
from bucket_memory.testing.faults import Faults, FaultyObjectStore
from bucket_memory.testing.versioned import VersionedMemoryObjectStore

ORIGIN = Origin(run_id="bench")
OPERATOR = Origin(run_id="bucket-memory erase", principal_id="bench")
LATENCY = 0.02  # seconds per request, as `make bench` takes for S3 in one region


async def seeded(commits: int, erased_every: int) -> VersionedMemoryObjectStore:
    """`commits` commits over 100 files, one commit in `erased_every` appending to the file to erase."""
    objects = VersionedMemoryObjectStore()
    store = LogFileStore(objects)
    versions: dict[str, str | None] = {}
    for n in range(commits):
        path = "people/alice.md" if n % erased_every == 0 else f"notes/{n % 100:03d}.md"
        current = versions.get(path)
        text = f"{path}: line {n}, phone +1 555 {n:04d}\n" * (1 + n // 100)
        versions[path] = await store.write(path, text, expected=current, origin=ORIGIN)
    await store.settle()
    return objects


async def one_erase(commits: int, erased_every: int) -> dict[str, Any]:
    objects = await seeded(commits, erased_every)
    counted = FaultyObjectStore(objects, Faults(latency=LATENCY))
    store = LogFileStore(counted)
    started, cpu = time.perf_counter(), time.process_time()
    erased = await MemoryAdmin(store).erase("people/alice.md", origin=OPERATOR)
    await store.settle()
    return {
        "seconds": time.perf_counter() - started,
        "cpu": time.process_time() - cpu,
        "requests": counted.requests,
        "by_operation": dict(counted.calls),
        "rewritten": len(erased.rewrites),
        "versions_deleted": len(erased.versions),
    }


def summary(values: list[float], digits: int) -> str:
    return f"{statistics.median(values):.{digits}f} ({min(values):.{digits}f}-{max(values):.{digits}f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="one run, 200 commits")
    quick = parser.parse_args().quick
    commits, runs = (200, 1) if quick else (1000, 3)
    results = [asyncio.run(one_erase(commits, 10)) for _ in range(runs)]
    first = results[0]
    operations = ", ".join(f"{name} {count}" for name, count in sorted(first["by_operation"].items()))
    title = f"{commits} commits ({commits // 10} of them its versions; {LATENCY * 1000:.0f} ms a request)"
    tables = f"""### Erase one file of {title}: median (min-max) of {runs}

| | erase |
|---|---|
| wall s | {summary([r["seconds"] for r in results], 2)} |
| CPU s | {summary([r["cpu"] for r in results], 2)} |
| requests | {summary([float(r["requests"]) for r in results], 0)} ({operations}) |
| objects rewritten | {first["rewritten"]} |
| old versions deleted | {first["versions_deleted"]} |

Machine: {platform.machine()}, {platform.python_version()}."""
    publish({"runs": results, "commits": commits}, saved_as="erase.json", section="erase", tables=tables)


if __name__ == "__main__":
    main()
