"""bucket-memory beside SlateDB in `make bench`: a cold open's CPU and a fresh process's whole cost.

Both stores hold the same 10,000 keys of about 1 KiB (files with frontmatter) and run on the same
footing: in memory in this process for the cold opens (our `MemoryObjectStore`, SlateDB's
`memory:///`), and on a local directory for the fresh processes. SlateDB opens lazily (a manifest,
then blocks as keys are read), we read the whole checkpoint at once, so a cold open is measured
three ways: open and read one key, open and list, open and read every key. Each figure is the
median of several runs, with min and max. A measure's runs alternate between the stores, so that
a machine whose speed drifts (a shared VM's steal time) slows both alike; the measures run one
after another, since a run of one measure slows the next (SlateDB's open after a full scan of
ours took 0.009 s against 0.005).

`python -m benchmarks.peers [--quick]` writes benchmarks/peers.json and the tables between the
peers markers in docs/performance.md.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from a13n_harness.providers.memory import Origin
from slatedb.uniffi import DbBuilder, KeyRange, ObjectStore, WriteBatch

from benchmarks.page import publish
from bucket_memory import LogFileStore, LogOptions, MemoryAdmin, open_store
from bucket_memory.objects.memory import MemoryObjectStore

ROOT = Path(__file__).parent.parent
ORIGIN = Origin(run_id="bench")
TEXT = "- a remembered fact about the user's preferences\n" * 20
ALL_KEYS = KeyRange(start=None, start_inclusive=False, end=None, end_inclusive=False)


def files(count: int) -> dict[str, str]:
    return {f"notes/{i:05}.md": f"---\ndescription: note {i}\ntags: [tea]\n---\n{TEXT}" for i in range(count)}


def spread(samples: list[float]) -> dict[str, float]:
    return {"median": statistics.median(samples), "min": min(samples), "max": max(samples)}


type Works = dict[str, Callable[[], Awaitable[object]]]


async def cpu_of(stores: dict[str, Works], runs: int) -> dict[str, dict[str, dict[str, float]]]:
    """CPU seconds of the process (every thread: SlateDB works on its own) per run of each store's
    each work: a measure at a time, the stores taking turns run by run."""
    samples: dict[str, dict[str, list[float]]] = {store: {} for store in stores}
    for measure in dict.fromkeys(measure for works in stores.values() for measure in works):
        for _ in range(runs):
            for store, works in stores.items():
                if measure in works:
                    started = time.process_time()
                    await works[measure]()
                    samples[store].setdefault(measure, []).append(time.process_time() - started)
    return {
        store: {measure: spread(taken) for measure, taken in measured.items()} for store, measured in samples.items()
    }


async def ours_cold(count: int) -> Works:
    objects = MemoryObjectStore()
    writer = LogFileStore(objects, options=LogOptions(checkpoint_min_commits=1))
    await MemoryAdmin(writer).put_files(files(count), replace=False, origin=ORIGIN)
    await writer.settle()

    async def one_key() -> None:
        await LogFileStore(objects).read("notes/05000.md")

    async def listing() -> None:
        await LogFileStore(objects).list()

    async def every_key() -> None:
        store = LogFileStore(objects)
        for entry in await store.list():
            await store.read(entry.path)

    return {"open and read one key": one_key, "open and list": listing, "open and read every key": every_key}


async def slatedb_cold(count: int) -> Works:
    objects = ObjectStore.resolve("memory:///")
    db = await DbBuilder("bench", objects).build()
    batch = WriteBatch()
    for path, text in files(count).items():
        batch.put(path.encode(), text.encode())
    await db.write(batch)
    await db.flush()
    await db.shutdown()

    async def one_key() -> None:
        opened = await DbBuilder("bench", objects).build()
        await opened.get(b"notes/05000.md")
        await opened.shutdown()

    async def every_key() -> None:
        opened = await DbBuilder("bench", objects).build()
        rows = await opened.scan(ALL_KEYS)
        while await rows.next_batch(1000):
            pass
        await opened.shutdown()

    return {"open and read one key": one_key, "open and read every key": every_key}


# A fresh process each, importing only its own store: open, read a key, write one durably, close;
# it prints its CPU and peak RSS, imports included, as a Lambda cold start pays them.
# Peak RSS from VmHWM: ru_maxrss keeps the parent's peak across exec on Linux (every child
# reported the bench's own 312 MB).
_REPORT = """
usage = resource.getrusage(resource.RUSAGE_SELF)
peak = next(line for line in open("/proc/self/status") if line.startswith("VmHWM:"))
print(json.dumps({"cpu": usage.ru_utime + usage.ru_stime, "rss_mb": int(peak.split()[1]) / 1024}))
"""
CHILDREN = {
    "ours": """
import asyncio, json, resource, sys
from a13n_harness.providers.memory import Origin
from bucket_memory import open_store

async def main() -> None:
    async with open_store(sys.argv[1]) as store:
        await store.read("notes/05000.md")
        await store.write(f"new/{sys.argv[2]}.md", "a new note\\n", expected=None, origin=Origin(run_id="bench"))

asyncio.run(main())
"""
    + _REPORT,
    "slatedb": """
import asyncio, json, resource, sys
from slatedb.uniffi import DbBuilder, ObjectStore

async def main() -> None:
    db = await DbBuilder(sys.argv[1], ObjectStore.resolve("file:///")).build()
    await db.get(b"notes/05000.md")
    written = await db.put(f"new/{sys.argv[2]}.md".encode(), b"a new note\\n")
    await written.await_durable()  # a put returns before its write is durable: wait, as our write does
    await db.shutdown()

asyncio.run(main())
"""
    + _REPORT,
}


async def fresh_processes(count: int, runs: int) -> dict[str, dict[str, dict[str, float]]]:
    measured: dict[str, dict[str, dict[str, float]]] = {}
    for kind in ("ours", "slatedb"):
        with tempfile.TemporaryDirectory() as directory:
            if kind == "ours":
                async with open_store(directory) as store:
                    await MemoryAdmin(store).put_files(files(count), replace=False, origin=ORIGIN)
            else:
                db = await DbBuilder(directory, ObjectStore.resolve("file:///")).build()
                batch = WriteBatch()
                for path, text in files(count).items():
                    batch.put(path.encode(), text.encode())
                await db.write(batch)
                await db.shutdown()
            samples = []
            for run_index in range(runs):
                process = await asyncio.create_subprocess_exec(
                    sys.executable, "-c", CHILDREN[kind], directory, str(run_index), stdout=asyncio.subprocess.PIPE
                )
                output, _ = await process.communicate()
                samples.append(json.loads(output))
            measured[kind] = {key: spread([sample[key] for sample in samples]) for key in ("cpu", "rss_mb")}
    return measured


async def run(quick: bool) -> dict[str, Any]:
    runs = 3 if quick else 15
    count = 10_000
    stores = {"ours": await ours_cold(count), "slatedb": await slatedb_cold(count)}
    return {
        "machine": f"{platform.processor() or platform.machine()}, {platform.python_version()}",
        "keys": count,
        "cold": await cpu_of(stores, runs),
        "process": await fresh_processes(count, max(3, runs // 3)),
    }


def _cell(figure: dict[str, float], unit: float = 1.0, digits: int = 3) -> str:
    return f"{figure['median'] * unit:.{digits}f} ({figure['min'] * unit:.{digits}f}-{figure['max'] * unit:.{digits}f})"


def tables(results: dict[str, Any]) -> str:
    cold, process = results["cold"], results["process"]
    rows = [
        "### Beside SlateDB: a cold open of 10,000 keys (CPU seconds, median (min-max), in memory)",
        "",
        "| | bucket-memory | SlateDB 0.17 | ours / SlateDB |",
        "|---|---|---|---|",
    ]
    for measure, ours in cold["ours"].items():
        theirs = cold["slatedb"].get(measure)
        ratio = f"{ours['median'] / theirs['median']:.1f}x" if theirs else "SlateDB cannot list without reading"
        rows.append(f"| {measure} | {_cell(ours)} | {_cell(theirs) if theirs else '-'} | {ratio} |")
    rows += [
        "",
        "### Beside SlateDB: a fresh process (import, open, read a key, durable write; local directory)",
        "",
        "| | bucket-memory | SlateDB 0.17 | ours / SlateDB |",
        "|---|---|---|---|",
        *(
            f"| {label} | {_cell(process['ours'][key], digits=digits)} | "
            f"{_cell(process['slatedb'][key], digits=digits)} | "
            f"{process['ours'][key]['median'] / process['slatedb'][key]['median']:.1f}x |"
            for label, key, digits in (("CPU s", "cpu", 2), ("peak RSS MB", "rss_mb", 0))
        ),
        "",
        f"Machine: {results['machine']}.",
    ]
    return "\n".join(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="fewer runs")
    results = asyncio.run(run(parser.parse_args().quick))
    publish(results, saved_as="peers.json", section="peers", tables=tables(results))


if __name__ == "__main__":
    main()
