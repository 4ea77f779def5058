"""Buckets written by earlier releases keep opening: a memory written by the first release, byte for byte.

`tests/golden/format-1` was written by main at 2ca2085 (commits with every kind of change, a group
commit whose changes carry their callers' origins, checkpoints with tombstones). Its objects must
decode, re-encode to the same bytes (so hashes stay valid), and serve the same files and history.
"""

from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bucket_memory import LogFileStore, MemoryAdmin
from bucket_memory.codec import Checkpoint, Commit, canonical

GOLDEN = Path(__file__).parent / "golden" / "format-1"


@pytest.fixture
def golden(tmp_path: Path) -> Path:
    copy = tmp_path / "memory"
    shutil.copytree(GOLDEN / "memory", copy)
    return copy


def test_every_object_reencodes_to_its_stored_bytes() -> None:
    objects = sorted((GOLDEN / "memory").rglob("*.json"))
    assert len(objects) == 11
    for path in objects:
        data = path.read_bytes()
        key = path.relative_to(GOLDEN / "memory").as_posix()
        decoded = (
            Commit.decode("golden", key, data) if key.startswith("log/") else Checkpoint.decode("golden", key, data)
        )
        assert decoded.encode() == data, key


async def test_the_store_serves_what_the_first_release_wrote(golden: Path) -> None:
    expected = json.loads((GOLDEN / "expected.json").read_text())
    store = LogFileStore.local(golden)
    files = {entry.path: entry.version for entry in await store.list()}
    assert files == {path: file["version"] for path, file in expected["files"].items()}
    for path, file in expected["files"].items():
        assert (await store.read(path)).text == file["text"]
    history = [
        [r.version, r.action, r.path, r.origin.run_id, r.origin.principal_id, r.origin.tool_call_id]
        for r in await MemoryAdmin(store).revisions()
    ]
    assert history == expected["history"]
    assert await MemoryAdmin(store).verify() == []
    assert (await store.changes(None)).cursor.startswith(str(expected["head"]))


async def test_a_golden_memory_takes_new_writes(golden: Path) -> None:
    from a13n_harness.providers.memory import Origin

    store = LogFileStore.local(golden)
    version = await store.write("after.md", "and more\n", expected="9", origin=Origin(run_id="new"))
    assert version == "10"
    assert await MemoryAdmin(LogFileStore.local(golden)).verify() == []


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=20,
)


@given(json_values)
def test_the_piecewise_encoding_off_the_loop_is_the_same_bytes(value: object) -> None:
    """Objects are encoded piecewise in worker threads and at once on the loop: hashes must not differ."""

    async def on_the_loop() -> bytes:
        return canonical(value)

    assert asyncio.run(on_the_loop()) == canonical(value)
