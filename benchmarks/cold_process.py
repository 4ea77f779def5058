"""A fresh process on Lambda terms: `python -m benchmarks.cold_process URL [S3_LAYER]` imports
bucket_memory, opens the memory at URL (an S3 one through S3_LAYER, aiobotocore by default), reads
one file, writes one, and prints the times and peak RSS as JSON."""

from __future__ import annotations

import asyncio
import json
import os
import resource
import sys
import time

started = time.perf_counter()
from a13n_harness.providers.memory import Origin  # noqa: E402 - what is timed is the import

import bucket_memory  # noqa: E402

imported = time.perf_counter()
sdk_loaded_by_import = "aiobotocore" in sys.modules or "google.cloud.storage" in sys.modules


async def main(url: str, s3_layer: str = "aiobotocore") -> dict[str, float]:
    async with bucket_memory.open_store(url, s3_layer=s3_layer) as store:  # type: ignore[arg-type]
        opened = time.perf_counter()
        entries = await store.list()
        await store.read(entries[0].path)
        first_read = time.perf_counter()
        await store.write(f"cold/probe-{os.getpid()}.md", str(time.time()), expected=None, origin=Origin(run_id="cold"))
        first_write = time.perf_counter()
    return {
        "import_s": imported - started,
        "first_read_s": first_read - opened,
        "first_write_s": first_write - first_read,
        "files": len(entries),
        "peak_rss_mb": peak_rss_mb(),
        "cpu_s": sum(resource.getrusage(resource.RUSAGE_SELF)[:2]),
        "sdk_loaded_by_import": float(sdk_loaded_by_import),
    }


def peak_rss_mb() -> float:
    """This process's peak RSS: VmHWM, since ru_maxrss keeps the parent's peak across exec on Linux
    (the bench's own 312 MB was reported for every child)."""
    with open("/proc/self/status") as status:
        peak = next(line for line in status if line.startswith("VmHWM:"))
    return int(peak.split()[1]) / 1024


if __name__ == "__main__":
    sys.stdout.write(json.dumps(asyncio.run(main(*sys.argv[1:3]))) + "\n")
