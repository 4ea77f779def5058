"""The two S3 object layers side by side in `make bench`: aiobotocore (the default) and obstore
(the `fast` extra), on one moto server, in one run.

Client CPU is this process's CPU time (every thread: obstore works on its own runtime) per
request, with moto in another process. Each figure is the median of several rounds, with min and
max. `python -m benchmarks.layers [--quick]` writes benchmarks/layers.json and the table between
the layers markers in docs/performance.md.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import shutil
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from a13n_harness.providers.memory import Origin

from benchmarks.page import publish
from benchmarks.peers import files, spread
from bucket_memory import LogFileStore, LogOptions, MemoryAdmin, open_store
from bucket_memory.objects.interface import CREATE
from bucket_memory.objects.s3 import S3ObjectStore
from bucket_memory.objects.s3_obstore import ObstoreS3ObjectStore
from bucket_memory.testing.emulators import moto_server

BUCKET = "bucket-memory-bench"
ORIGIN = Origin(run_id="bench")
type S3Layer = S3ObjectStore | ObstoreS3ObjectStore
LAYERS: dict[str, Callable[[str], S3Layer]] = {
    "aiobotocore": lambda prefix: S3ObjectStore(bucket=BUCKET, prefix=prefix),
    "obstore": lambda prefix: ObstoreS3ObjectStore(bucket=BUCKET, prefix=prefix),
}
BODY = b"x" * 2048  # about a commit's size


async def per_call(work: Callable[[int], Awaitable[object]], calls: int, rounds: int) -> dict[str, dict[str, float]]:
    """CPU and wall milliseconds per call of `work`, `calls` in a row, over `rounds` rounds."""
    cpu, wall = [], []
    for round_ in range(rounds):
        started, clock = time.process_time(), time.perf_counter()
        for number in range(calls):
            await work(round_ * calls + number)
        cpu.append((time.process_time() - started) * 1000 / calls)
        wall.append((time.perf_counter() - clock) * 1000 / calls)
    return {"cpu_ms": spread(cpu), "wall_ms": spread(wall)}


async def requests(layer: str, calls: int, rounds: int) -> dict[str, Any]:
    raw = LAYERS[layer](f"bench/{uuid.uuid4().hex}")
    await raw.put("warm", b"", CREATE)  # clients made, models loaded, connections open
    measured = {
        "conditional PUT (create)": await per_call(lambda n: raw.put(f"raw/{n:020}.json", BODY, CREATE), calls, rounds),
        "GET (2 KiB)": await per_call(lambda n: raw.get(f"raw/{n:020}.json"), calls, rounds),
        "GET of a missing key (a fresh read's probe)": await per_call(lambda n: raw.get(f"none/{n}"), calls, rounds),
        "LIST (one page, up to 1,000 keys)": await per_call(
            lambda n: raw.list("raw/", start_after=f"raw/{n:020}.json"), 20, rounds
        ),
    }
    await raw.aclose()
    objects = LAYERS[layer](f"bench/{uuid.uuid4().hex}")
    store = LogFileStore(objects)
    await store.write("warm.md", "w", expected=None, origin=ORIGIN)
    measured["durable write (LogFileStore.write)"] = await per_call(
        lambda n: store.write(f"notes/{n}.md", "a fact\n", expected=None, origin=ORIGIN), calls // 2, rounds
    )
    await objects.aclose()
    return measured


async def cold_open(layer: str, prefix: str, rounds: int) -> dict[str, float]:
    """CPU seconds of a new store's first listing of the memory at `prefix` (10,000 files)."""
    samples = []
    for _ in range(rounds):
        objects = LAYERS[layer](prefix)
        await objects.get("no-such-key")  # the client is made before the clock starts
        started = time.process_time()
        await LogFileStore(objects).list()
        samples.append(time.process_time() - started)
        await objects.aclose()
    return spread(samples)


async def fresh_process(layer: str, url: str, runs: int) -> dict[str, dict[str, float]]:
    """A fresh process's CPU seconds and peak RSS (import, cold open, read, durable write) on `layer`."""
    samples = []
    for _ in range(runs):
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "benchmarks.cold_process", url, layer, stdout=asyncio.subprocess.PIPE
        )
        output, _ = await process.communicate()
        samples.append(json.loads(output))
    return {key: spread([sample[key] for sample in samples]) for key in ("cpu_s", "peak_rss_mb", "import_s")}


async def command_line(url: str, runs: int) -> dict[str, dict[str, float]]:
    """Wall seconds of `bucket-memory ls`, `cat` and `put` and of `aws s3 ls --recursive` (when
    aws-cli is on PATH) on the memory at `url`, each a fresh process."""
    ours = str(Path(sys.executable).parent / "bucket-memory")
    with tempfile.TemporaryDirectory() as scratch:
        source = Path(scratch) / "note.md"
        source.write_text("green tea at standup\n")
        commands = {
            "bucket-memory ls": [ours, "ls", url],
            "bucket-memory cat": [ours, "cat", url, "notes/00001.md"],
            "bucket-memory put": [ours, "put", url, "notes/put.md", str(source), "--principal", "bench"],
        }
        if aws := shutil.which("aws"):
            commands["aws s3 ls --recursive"] = [aws, "s3", "ls", "--recursive", f"{url}/"]
        measured = {}
        for name, command in commands.items():
            samples = []
            for _ in range(runs):
                started = time.perf_counter()
                process = await asyncio.create_subprocess_exec(*command, stdout=asyncio.subprocess.DEVNULL)
                assert await process.wait() == 0, command
                samples.append(time.perf_counter() - started)
            measured[name] = spread(samples)
    return measured


async def run(quick: bool) -> dict[str, Any]:
    calls, rounds = (50, 3) if quick else (200, 5)
    with moto_server() as url:
        os.environ.update(
            AWS_ENDPOINT_URL=url,
            AWS_ACCESS_KEY_ID="bench",
            AWS_SECRET_ACCESS_KEY="bench",
            AWS_DEFAULT_REGION="us-east-1",
        )
        import botocore.session

        botocore.session.get_session().create_client("s3").create_bucket(Bucket=BUCKET)
        prefix = f"bench/{uuid.uuid4().hex}"
        seeding = S3ObjectStore(bucket=BUCKET, prefix=prefix)
        writer = LogFileStore(seeding, options=LogOptions(checkpoint_min_commits=1))
        await MemoryAdmin(writer).put_files(files(10_000), replace=False, origin=ORIGIN)
        await writer.settle()
        await seeding.aclose()
        small = f"s3://{BUCKET}/bench/{uuid.uuid4().hex}"
        async with open_store(small) as store:
            await MemoryAdmin(store).put_files(files(20), replace=False, origin=ORIGIN)
        return {
            "machine": f"{platform.processor() or platform.machine()}, {platform.python_version()}",
            "calls": calls,
            "rounds": rounds,
            "requests": {layer: await requests(layer, calls, rounds) for layer in LAYERS},
            "cold open": {layer: await cold_open(layer, prefix, rounds) for layer in LAYERS},
            "process": {layer: await fresh_process(layer, f"s3://{BUCKET}/{prefix}", rounds) for layer in LAYERS},
            "command line": await command_line(small, rounds),
        }


def _cell(figure: dict[str, float], digits: int = 2) -> str:
    return f"{figure['median']:.{digits}f} ({figure['min']:.{digits}f}-{figure['max']:.{digits}f})"


def tables(results: dict[str, Any]) -> str:
    ours, fast = results["requests"]["aiobotocore"], results["requests"]["obstore"]
    rows = [
        "### The S3 layers on moto: client CPU and wall time per request (ms, median (min-max))",
        "",
        "| request | aiobotocore CPU | obstore CPU | obstore / aiobotocore | aiobotocore wall | obstore wall |",
        "|---|---|---|---|---|---|",
    ]
    for measure in ours:
        slow_cpu, fast_cpu = ours[measure]["cpu_ms"], fast[measure]["cpu_ms"]
        rows.append(
            f"| {measure} | {_cell(slow_cpu)} | {_cell(fast_cpu)} | {fast_cpu['median'] / slow_cpu['median']:.2f}x | "
            f"{_cell(ours[measure]['wall_ms'])} | {_cell(fast[measure]['wall_ms'])} |"
        )
    cold, process = results["cold open"], results["process"]
    rows += [
        "",
        "| a cold open and listing of 10,000 files (CPU s) | aiobotocore | obstore | obstore / aiobotocore |",
        "|---|---|---|---|",
        f"| | {_cell(cold['aiobotocore'], 3)} | {_cell(cold['obstore'], 3)} | "
        f"{cold['obstore']['median'] / cold['aiobotocore']['median']:.2f}x |",
        "",
        "| a fresh process on the same memory (import, cold open, read, durable write) | aiobotocore | obstore "
        "| obstore / aiobotocore |",
        "|---|---|---|---|",
        *(
            f"| {label} | {_cell(process['aiobotocore'][key], digits)} | {_cell(process['obstore'][key], digits)} | "
            f"{process['obstore'][key]['median'] / process['aiobotocore'][key]['median']:.2f}x |"
            for label, key, digits in (
                ("CPU s", "cpu_s", 2),
                ("import s (wall)", "import_s", 2),
                ("peak RSS MB", "peak_rss_mb", 0),
            )
        ),
        "",
        *_command_line(results["command line"]),
        f"{results['calls']} requests of each kind in a row, {results['rounds']} rounds; durable writes "
        f"{results['calls'] // 2} per round. Machine: {results['machine']}.",
    ]
    return "\n".join(rows)


def _command_line(measured: dict[str, dict[str, float]]) -> list[str]:
    rows = ["| a memory of 20 files from the command line (s wall, a fresh process) | |", "|---|---|"]
    rows += [f"| {name} | {_cell(figure)} |" for name, figure in measured.items()]
    if (theirs := measured.get("aws s3 ls --recursive")) is not None:
        for name, figure in measured.items():
            if name.startswith("bucket-memory"):
                rows.append(f"| {name} / aws s3 ls | {figure['median'] / theirs['median']:.1f}x |")
    return [*rows, ""]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="fewer requests and rounds")
    results = asyncio.run(run(parser.parse_args().quick))
    publish(results, saved_as="layers.json", section="layers", tables=tables(results))


if __name__ == "__main__":
    main()
