"""The store and the event loop it runs on: large work never stalls it."""

from __future__ import annotations

import random
import string
from datetime import UTC, datetime

import pytest
from a13n_harness.providers.memory import Origin

from bucket_memory import LogOptions, MemoryAdmin, open_store
from bucket_memory.testing.stalls import stall_meter

ORIGIN = Origin(run_id="run")
# The limit the hostile-input issue sets; a 32 MiB checkpoint parsed on the loop takes about 250 ms.
LONGEST_STALL = 0.100


def full_memory() -> dict[str, str]:
    """32 MiB of text, as 520 files just under the harness's 64 KiB file limit."""
    chance = random.Random(7)
    return {f"notes/{n:04d}.md": "".join(chance.choices(string.ascii_letters + " \n", k=64_500)) for n in range(520)}


@pytest.mark.parametrize("memory_url", ["local", "s3"], indirect=True)
async def test_no_operation_on_a_32_mib_memory_stalls_the_event_loop(memory_url: str) -> None:
    options = LogOptions(checkpoint_min_commits=1, grace_period=0, retain_commits=1, retain_seconds=0)
    async with open_store(memory_url, options=options) as store:
        admin = MemoryAdmin(store)
        async with stall_meter() as writing:
            await admin.put_files(full_memory(), replace=False, origin=ORIGIN)
            await store.write("notes/0000.md", "shorter", expected="1", origin=ORIGIN)  # checkpoints, compacts
            await store.settle()
        assert store.log.cached_state is not None and store.log.cached_state.live_bytes > 32_000_000
    async with open_store(memory_url, options=options) as store:
        admin = MemoryAdmin(store)
        async with stall_meter() as reading:
            entries = await store.list()  # a cold start: the 32 MiB checkpoint
            await store.read("notes/0001.md")
            await store.search("needle", regex=False, case_sensitive=False, path="", limit=5)
            await store.changes(None)
            await admin.verify()
            await admin.seq_at(datetime.now(UTC))
        assert len(entries) == 520
    assert writing.longest < LONGEST_STALL, f"writing stalled the loop for {writing.longest:.3f} s"
    assert reading.longest < LONGEST_STALL, f"reading stalled the loop for {reading.longest:.3f} s"
