"""A latency proxy in a process of its own, so that the CPU a benchmark measures is its clients'
alone: `python -m benchmarks.latency_proxy UPSTREAM SECONDS` prints the URL it listens on; every
request waits SECONDS and is passed on; each line read on stdin is answered with one line of
JSON, the requests so far by HTTP method."""

from __future__ import annotations

import asyncio
import json
import sys
from collections import Counter

from bucket_memory.testing.proxy import fault_proxy


async def serve(upstream: str, seconds: float) -> None:
    methods: Counter[str] = Counter()

    def count(number: int, method: str, path: str) -> None:
        methods[method] += 1

    async with fault_proxy(upstream, count, latency=seconds) as (url, _):
        print(url, flush=True)
        while await asyncio.to_thread(sys.stdin.readline):
            print(json.dumps(methods), flush=True)


class LatencyProxy:
    """The proxy process, seen from the benchmark: its URL, and the requests it has passed."""

    def __init__(self, upstream: str, seconds: float) -> None:
        self._process = asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "benchmarks.latency_proxy",
            upstream,
            str(seconds),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
        )
        self.url = ""

    async def __aenter__(self) -> LatencyProxy:
        self.process = await self._process
        assert self.process.stdout is not None
        self.url = (await self.process.stdout.readline()).decode().strip()
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.process.kill()
        await self.process.wait()

    async def requests(self) -> Counter[str]:
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(b"?\n")
        await self.process.stdin.drain()
        return Counter(json.loads(await self.process.stdout.readline()))


if __name__ == "__main__":
    asyncio.run(serve(sys.argv[1], float(sys.argv[2])))
