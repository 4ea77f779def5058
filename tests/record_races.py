"""Workers that add and update records in separate OS processes on one record memory."""

from __future__ import annotations

import multiprocessing
from collections.abc import Sequence
from multiprocessing.synchronize import Barrier

from a13n_harness.providers.memory import Origin

from bucket_memory import open_record_store

from .races import _report


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
