"""Workers that add, update and search records in separate OS processes on one record memory."""

from __future__ import annotations

import multiprocessing
import re
from collections.abc import Sequence
from multiprocessing.synchronize import Barrier

from a13n_harness.providers.memory import Origin
from pydantic_ai import Embedder

from bucket_memory import open_record_store
from bucket_memory.testing.embeddings import HashingEmbeddingModel

from .races import _report

_WRITTEN = re.compile(r"w\d (noted|changed) fact \d+")


def add_and_update(
    barrier: Barrier, results: multiprocessing.Queue[object], url: str, worker: str, shared: Sequence[str], rounds: int
) -> None:
    """Add `rounds` records of its own, then, in step with the others, update every shared record
    once a round. Report what was acknowledged: ("added", id, text) and ("updated", id, text)."""
    _report(results, lambda: _add_and_update(barrier, url, worker, shared, rounds))


async def _add_and_update(
    barrier: Barrier, url: str, worker: str, shared: Sequence[str], rounds: int
) -> list[tuple[str, str, str]]:
    acknowledged: list[tuple[str, str, str]] = []
    async with open_record_store(url, origin=Origin(principal_id=worker)) as store:
        for n in range(rounds):
            record = await store.add(f"{worker} noted fact {n}")
            acknowledged.append(("added", record.id, record.text))
        for n in range(rounds):
            barrier.wait()
            for record_id in shared:
                record = await store.update(record_id, f"{worker} says round {n}")
                acknowledged.append(("updated", record.id, record.text))
    return acknowledged


def write_or_search(
    barrier: Barrier, results: multiprocessing.Queue[object], role: str, url: str, name: str, rounds: int
) -> None:
    """Once all processes are ready, as `role`:

    - "write": add `rounds` records, then change each one's text; report ("written", [(id, last text)]).
    - "search" or "search-embedded": search `rounds` times for what every record says, by BM25 or
      with the offline embedder (which embeds the records writers add without a vector, and writes
      the vectors back); report ("seen", [records found by each search]) or the first record found
      that no writer wrote.
    """
    work = _write(barrier, url, name, rounds) if role == "write" else _search(barrier, url, rounds, role != "search")
    _report(results, lambda: work)


async def _write(barrier: Barrier, url: str, name: str, rounds: int) -> tuple[str, list[tuple[str, str]]]:
    async with open_record_store(url, origin=Origin(principal_id=name)) as store:
        barrier.wait()
        ids = [(await store.add(f"{name} noted fact {n}")).id for n in range(rounds)]
        changed = [(found, (await store.update(found, f"{name} changed fact {n}")).text) for n, found in enumerate(ids)]
    return "written", changed


async def _search(barrier: Barrier, url: str, rounds: int, embedded: bool) -> tuple[str, list[int]] | str:
    embedder = Embedder(HashingEmbeddingModel()) if embedded else None
    found: list[int] = []
    async with open_record_store(url, embedder=embedder, embed_batch=4) as store:
        barrier.wait()
        for _ in range(rounds):
            records = await store.search("noted changed fact", limit=10_000)
            for record in records:
                if not _WRITTEN.fullmatch(record.text):
                    return f"a search found {record.text!r}, which no writer wrote"
            found.append(len(records))
    return "seen", found


def search_with_model(
    barrier: Barrier, results: multiprocessing.Queue[object], url: str, model: str, dimensions: int, rounds: int
) -> None:
    """Search `rounds` times with the offline embedder named `model`, in step with the others (each
    round a race); report ("embedded", [record texts embedded by each search])."""
    _report(results, lambda: _search_with_model(barrier, url, model, dimensions, rounds))


async def _search_with_model(
    barrier: Barrier, url: str, model: str, dimensions: int, rounds: int
) -> tuple[str, list[int]]:
    embedding = HashingEmbeddingModel(model, dimensions)
    embedded: list[int] = []
    async with open_record_store(url, embedder=Embedder(embedding), embed_batch=50) as store:
        for _ in range(rounds):
            barrier.wait()
            before = len(embedding.embedded)
            await store.search("which team owns the release", limit=5)
            embedded.append(len(embedding.embedded) - before - 1)  # less the query
    return "embedded", embedded
