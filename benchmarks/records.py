"""Record memory in `make bench`: search CPU beside a plain numpy matrix product over the same
vectors, the first search after a cold open beside decoding the stored vectors into a matrix,
BM25 search and its update after an add, requests per operation, and recall@5 of each ranking on a
labelled set (benchmarks/recall_set.py).

`python -m benchmarks.records [--quick]` writes benchmarks/records.json and the tables between
the records markers in docs/performance.md. BLAS runs on one thread here, for the baselines and
the store alike: with more, a matrix-vector product's CPU time is mostly BLAS threads spinning,
which varied tenfold between runs on a busy machine.
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # before numpy loads BLAS

import argparse
import asyncio
import base64
import gc
import platform
import random
import statistics
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import numpy
from a13n_harness.providers.memory import Origin
from pydantic_ai import Embedder

from benchmarks.page import publish
from benchmarks.recall_set import questions_per_kind, recall_at_5
from bucket_memory import LogFileStore, LogRecordStore, MemoryAdmin
from bucket_memory.format.wire_values import time_text
from bucket_memory.objects.memory import MemoryObjectStore
from bucket_memory.records.ranking import Ranking
from bucket_memory.records.record_format import Embedding, RecordBody, packed
from bucket_memory.testing.embeddings import HashingEmbeddingModel
from bucket_memory.testing.faults import Faults, FaultyObjectStore

ROOT = Path(__file__).parent.parent
ORIGIN = Origin(run_id="bench")
DIMENSIONS = 384
MODEL = "test:hashing-v1"  # the offline model's space: its queries are compared with the stored vectors
SPACIOUS = 2**31  # a memory quota above 100,000 records of 384 dimensions (about 110 MB)


def cpu(work: Callable[[], object]) -> float:
    started = time.process_time()
    work()
    return time.process_time() - started


async def cpu_of(work: Callable[[], Awaitable[object]]) -> float:
    started = time.process_time()
    await work()
    return time.process_time() - started


async def seeded(records: int, vectors: bool) -> tuple[MemoryObjectStore, list[str]]:
    """A memory of `records` records of 12 random words (and a random unit vector of 384
    dimensions each, stored as the offline model's), written in one commit and checkpointed; and
    their stored vectors' base64."""
    chance = random.Random(records)
    words = [f"word{n}" for n in range(2000)]
    rows = numpy.random.default_rng(records).standard_normal((records, DIMENSIONS)).astype(numpy.float32)
    rows /= numpy.linalg.norm(rows, axis=1, keepdims=True)
    stored = [packed(row) for row in rows] if vectors else []
    bodies = {
        f"{n:032x}.json": RecordBody(
            " ".join(chance.choices(words, k=12)), time_text(1.7e9), (Embedding(MODEL, stored[n]),) if vectors else ()
        ).encode()
        for n in range(records)
    }
    objects = MemoryObjectStore()
    seeder = LogFileStore(objects, max_bytes=SPACIOUS)
    await MemoryAdmin(seeder).put_files(bodies, replace=False, origin=ORIGIN)
    await seeder.settle()  # its checkpoint written: what a cold open reads
    return objects, stored


def embedder() -> Embedder:
    return Embedder(HashingEmbeddingModel(dimensions=DIMENSIONS))


async def vector_search(records: int, runs: int) -> dict[str, float]:
    """Steady search CPU by vectors and hybrid beside `matrix @ query` on the same vectors, and the
    first search after a cold open beside decoding the stored vectors into that matrix. The cold
    measures are the least of three, each beside its own decode: a busy machine only adds time."""
    objects, stored = await seeded(records, vectors=True)

    def decoded() -> numpy.ndarray:
        data = b"".join(base64.b64decode(text) for text in stored)
        return numpy.frombuffer(data, dtype="<f2").reshape(records, DIMENSIONS).astype(numpy.float32)

    matrix = decoded()
    row: dict[str, float] = {"records": records}
    decodes = []
    for ranking in ("vectors", "hybrid"):
        colds = []
        for _ in range(3):
            gc.collect()  # no garbage of the run before left to collect
            decodes.append(cpu(decoded))
            colds.append(await cold_search(objects, ranking))
        row[f"{ranking}_state_s"], row[f"{ranking}_first_s"] = (min(column) for column in zip(*colds, strict=True))
        row[f"{ranking}_search_ms"], row[f"{ranking}_matmul_ms"] = await steady_search(objects, ranking, matrix, runs)
    row["decode_s"] = min(decodes)
    return row


async def cold_search(objects: MemoryObjectStore, ranking: Ranking) -> tuple[float, float]:
    """CPU seconds of the log's cold start and of the first search after it, in a store of its own
    that is gone afterwards (a cold process holds one)."""
    store = LogRecordStore(LogFileStore(objects, max_bytes=SPACIOUS), embedder=embedder(), ranking=ranking)
    state = await cpu_of(store.files.state)
    return state, await cpu_of(lambda: store.search("word1 word2 word3", limit=5))


async def steady_search(
    objects: MemoryObjectStore, ranking: Ranking, matrix: numpy.ndarray, runs: int
) -> tuple[float, float]:
    """Median CPU milliseconds of a search of an unchanged memory and of `matrix @ query`,
    interleaved so that the machine's load falls on both alike."""
    store = LogRecordStore(LogFileStore(objects, max_bytes=SPACIOUS), embedder=embedder(), ranking=ranking)
    await store.search("word1 word2 word3", limit=5)
    products, searches = [], []
    for n in range(runs):
        query = matrix[n % len(matrix)]
        products.append(cpu(lambda: matrix @ query))  # noqa: B023 - called at once
        searches.append(await cpu_of(lambda: store.search(f"word{n} word{n + 7}", limit=5)))  # noqa: B023
    return statistics.median(searches) * 1000, statistics.median(products) * 1000


async def bm25_search(records: int, runs: int) -> dict[str, float]:
    """BM25 search CPU on an unchanged memory, the first search after one add (the index's update),
    and requests per add and per search at 20 ms per request."""
    objects, _ = await seeded(records, vectors=False)
    counted = FaultyObjectStore(objects, Faults(latency=0.020))
    store = LogRecordStore(LogFileStore(counted, max_bytes=SPACIOUS))
    first = await cpu_of(lambda: store.search("word1 word2", limit=5))
    steady = [await cpu_of(lambda: store.search(f"word{n} word{n + 3}", limit=5)) for n in range(runs)]  # noqa: B023
    updates, adds, searches = [], [], []
    for n in range(runs):
        counted.calls.clear()
        await store.add(f"word{n} and a new record")
        adds.append(counted.requests)
        counted.calls.clear()
        updates.append(await cpu_of(lambda: store.search(f"word{n} word{n + 5}", limit=5)))  # noqa: B023
        searches.append(counted.requests)
    return {
        "records": records,
        "first_ms": first * 1000,
        "search_ms": statistics.median(steady) * 1000,
        "after_add_ms": statistics.median(updates) * 1000,
        "requests_per_add": statistics.mean(adds),
        "requests_per_search": statistics.mean(searches),
    }


def tables(results: dict[str, Any]) -> str:
    lines = [
        "### Record search beside numpy (384 dimensions; CPU; BLAS on one thread)",
        "",
        "Steady: the median CPU of a search of an unchanged memory (its GET, the query's embedding by "
        "the offline model, ranking) and of `matrix @ query` over the same vectors, interleaved in one run.",
        "",
        "| records | ranking | search ms | matmul ms | ratio |",
        "| ---: | --- | ---: | ---: | ---: |",
    ]
    for row in results["vectors"]:
        for ranking in ("vectors", "hybrid"):
            search, matmul = row[f"{ranking}_search_ms"], row[f"{ranking}_matmul_ms"]
            lines.append(
                f"| {row['records']:,.0f} | {ranking} | {search:.2f} | {matmul:.2f} | {search / matmul:.1f}x |"
            )
    lines += [
        "",
        "First search after a cold open: CPU of the log's cold start (the checkpoint read into a state, "
        "as for any first operation) and of the first search (decoding every record and building the "
        "index), beside decoding the stored vectors into a float32 matrix (base64, then numpy).",
        "",
        "| records | ranking | decode s | cold start s | first search s | first search / decode | both / decode |",
        "| ---: | --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for row in results["vectors"]:
        for ranking in ("vectors", "hybrid"):
            state, first, decode = row[f"{ranking}_state_s"], row[f"{ranking}_first_s"], row["decode_s"]
            lines.append(
                f"| {row['records']:,.0f} | {ranking} | {decode:.2f} | {state:.2f} | {first:.2f} "
                f"| {first / decode:.1f}x | {(state + first) / decode:.1f}x |"
            )
    lines += [
        "",
        "### BM25 search (CPU; 20 ms per request for the counts)",
        "",
        "| records | first search (with the cold start) ms | search ms | search after an add ms | requests per add "
        "| requests per search |",
        "| ---: | ---: | ---: | ---: | ---: | ---: |",
        *(
            f"| {r['records']:,.0f} | {r['first_ms']:.0f} | {r['search_ms']:.2f} | {r['after_add_ms']:.2f} "
            f"| {r['requests_per_add']:.0f} | {r['requests_per_search']:.1f} |"
            for r in results["bm25"]
        ),
        "",
        "### Recall@5 on the labelled set (benchmarks/recall_set.json; the offline hashing model, 384 dimensions)",
        "",
        "The share of questions whose known answer is among the first five records found, of all of them "
        "and by how the question is worded against its answer.",
        "",
        "| ranking | " + " | ".join(f"{kind} ({count})" for kind, count in results["recall_questions"].items()) + " |",
        "| --- |" + " ---: |" * len(results["recall_questions"]),
        *(
            f"| {ranking} | " + " | ".join(f"{share:.2f}" for share in shares.values()) + " |"
            for ranking, shares in results["recall"].items()
        ),
        "",
        "### Two models on one memory (a model change half rolled out)",
        "",
        "Two stores, one with each of two offline models, search in turn over records stored without "
        "vectors; each writes back the vectors it makes. Texts embedded (less the queries) and commits.",
        "",
        "| records | searches | texts embedded | per search | commits | per search |",
        "| ---: | ---: | ---: | ---: | ---: | ---: |",
        "| {records} | {searches} | {embedded} | {per:.1f} | {commits} | {commits_per:.2f} |".format(
            **results["rollout"],
            per=results["rollout"]["embedded"] / results["rollout"]["searches"],
            commits_per=results["rollout"]["commits"] / results["rollout"]["searches"],
        ),
        "",
        f"Machine: {results['machine']}",
        "",
    ]
    return "\n".join(lines)


async def rollout(records: int = 200, searches: int = 6) -> dict[str, float]:
    """A model change half rolled out: two stores (two processes' worth) on one memory of records
    stored without vectors, one with each of two models, searching in turn; texts embedded (less
    the queries) and commits, per search."""
    objects = MemoryObjectStore()
    seeder = LogFileStore(objects)
    await MemoryAdmin(seeder).put_files(
        {
            f"{n:032x}.json": RecordBody(f"team {n % 7} owns release {n}", time_text(1.7e9)).encode()
            for n in range(records)
        },
        replace=False,
        origin=ORIGIN,
    )
    models = [HashingEmbeddingModel("hashing-v1", 64), HashingEmbeddingModel("hashing-v2", 32)]
    stores = [LogRecordStore(LogFileStore(objects), embedder=Embedder(model), origin=ORIGIN) for model in models]
    before = (await seeder.state()).head
    for n in range(searches):
        await stores[n % 2].search("which team owns the release", limit=5)
    commits = (await seeder.state()).head - before
    embedded = sum(len(model.embedded) for model in models) - searches
    return {"records": records, "searches": searches, "embedded": embedded, "commits": commits}


async def run(quick: bool) -> dict[str, Any]:
    runs = 20 if quick else 60
    sizes = (10_000,) if quick else (10_000, 100_000)
    return {
        "machine": f"{platform.processor() or platform.machine()}, {platform.python_version()}, {os.cpu_count()} cores",
        "vectors": [await vector_search(records, runs) for records in sizes],
        "bm25": [await bm25_search(records, runs) for records in (1_000, 10_000)],
        "recall": await recall_at_5(),
        "recall_questions": questions_per_kind(),
        "rollout": await rollout(),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="10,000 records only, fewer runs")
    results = asyncio.run(run(parser.parse_args().quick))
    publish(results, saved_as="records.json", section="records", tables=tables(results))


if __name__ == "__main__":
    main()
