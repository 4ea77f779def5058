"""The real harness `FileMemoryCapability` and tools over a bucket-memory store, conversations in separate processes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from a13n_harness.providers.memory import Origin

from bucket_memory import MemoryAdmin, open_store

from .conftest import fresh_memory_url
from .conversations import converse
from .helpers import fresh_processes

SLOW = pytest.mark.slow


@pytest.fixture(params=["local", pytest.param("s3", marks=SLOW), pytest.param("gcs", marks=SLOW)])
def memory_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A local memory in `make test` (the buckets in `make test-slow`: the harness on S3 runs in
    test_deploy too); each conversation spawns processes that import the harness, so the rest run as slow."""
    return fresh_memory_url(request, tmp_path)


async def test_two_conversations_share_a_memory(memory_url: str, tmp_path: Path) -> None:
    async with open_store(memory_url) as store:
        await store.write("shared.md", "the draft plan\n", expected=None, origin=Origin(principal_id="setup"))
    bob, alice = str(tmp_path / "bob.json"), str(tmp_path / "alice.json")

    with fresh_processes(3, importing="tests.conversations") as (bob_first, alice_run, bob_second):
        first: dict[str, Any] = bob_first.submit(converse, memory_url, bob, "bob_reads", {}).result(timeout=180)
        assert 'kind="full"' in first["context"] and "shared.md" in first["context"]
        viewed = first["answers"][1]
        assert viewed["content"] == "the draft plan\n"

        alice_run.submit(converse, memory_url, alice, "alice_writes", {}).result(timeout=180)

        stale = {"version": viewed["version"], "url": memory_url, "alice": alice}
        second: dict[str, Any] = bob_second.submit(converse, memory_url, bob, "bob_stale", stale).result(timeout=180)
    # Bob's next run is told what Alice changed, through the cursor persisted with his conversation.
    assert 'kind="changes"' in second["context"]
    assert "notes/plan.md" in second["context"] and "shared.md" in second["context"]
    stale_delete, fresh_view, stale_create = (json.loads(a) if isinstance(a, str) else a for a in second["answers"])
    assert stale_delete["error"] == "version_mismatch"
    assert stale_delete["current"]["content"] == "the final plan\n"
    assert fresh_view["content"] == "the final plan\n"
    # Bob read shared.md, Alice changed it, and Bob's write that relied on the read is refused.
    assert stale_create["error"] == "read_conflict"
    assert stale_create["current"]["content"] == "the approved plan\n"
    async with open_store(memory_url) as store:
        assert [entry.path for entry in await store.list()] == ["notes/plan.md", "shared.md"]
        assert [r.origin.principal_id for r in await MemoryAdmin(store).revisions("shared.md")] == [
            "alice",
            "alice",
            "setup",
        ]
