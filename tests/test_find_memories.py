"""Finding the memories under a prefix costs a request per 1000 memories, whatever their history."""

from __future__ import annotations

import asyncio
import builtins
import math
from pathlib import Path
from typing import Any

import pytest
from a13n_harness.providers.memory import Origin

from bucket_memory.connect import find_memories, memory_prefixes, open_store
from bucket_memory.destroy import Destroyer
from bucket_memory.format.tombstone import DESTROYED, PROOF_KEY
from bucket_memory.format.wire_values import checkpoint_key, log_key
from bucket_memory.objects.bulk import RolledPage
from bucket_memory.objects.interface import ObjectInfo
from bucket_memory.objects.memory import MemoryObjectStore

from .conftest import BUCKET, unique_prefix

# Sibling prefixes that start alike, a child memory, folders named like "blog", strays, the root.
LAYOUT = {
    "": 2,
    "users/1": 3,
    "users/10": 1,
    "users/1/child": 2,
    "users/blog": 1,
    "users/catalog/x": 1,
    "teams/a/b/c": 1,
}
STRAYS = ["users/readme.txt", "users/blog/post.html", "users/2/notes/log.txt", "users/3/logs/x.json"]


class PagedCount(MemoryObjectStore):
    """The in-memory bucket, counting requests as S3 pages them: a page per 1000 keys listed."""

    def __init__(self) -> None:
        super().__init__()
        self.lists = 0

    async def list(
        self, prefix: str, *, start_after: str | None = None, limit: int | None = None
    ) -> builtins.list[ObjectInfo]:
        found = await super().list(prefix, start_after=start_after, limit=limit)
        self.lists += max(1, math.ceil(len(found) / 1000))
        return found

    async def list_rolled(self, prefix: str, delimiter: str, *, token: str | None = None) -> RolledPage:
        self.lists += 1
        return await super().list_rolled(prefix, delimiter, token=token)


def _fill(objects: MemoryObjectStore, layout: dict[str, int], strays: list[str]) -> None:
    for prefix, commits in layout.items():
        for seq in range(1, commits + 1):
            objects.objects[f"{prefix}/{log_key(seq)}".lstrip("/")] = (b"{}", 0.0)
    for key in strays:
        objects.objects[key] = (b"x", 0.0)


async def test_each_memory_once_and_nothing_else() -> None:
    objects = PagedCount()
    _fill(objects, LAYOUT, STRAYS)
    objects.objects["users/only-checkpoints/" + checkpoint_key(40)] = (b"{}", 0.0)
    assert await memory_prefixes(objects) == sorted([*LAYOUT, "users/only-checkpoints"])


async def test_memories_with_long_histories_cost_a_listing_per_1000_memories() -> None:
    """The whole bucket was listed: 2,500 memories of 40 commits each took 100 requests."""
    objects = PagedCount()
    memories = {f"users/{number:05d}": 40 for number in range(2500)}
    _fill(objects, memories, [])
    assert await memory_prefixes(objects) == sorted(memories)
    assert objects.lists <= math.ceil(len(memories) / 1000) + 1
    assert objects.lists == 3


@pytest.mark.parametrize("scheme", ["s3", "gs"])
async def test_the_clouds_roll_up_at_each_log(scheme: str, request: pytest.FixtureRequest) -> None:
    base = unique_prefix()
    keys = [
        f"{base}/{prefix}/{log_key(seq)}".replace("//", "/") for prefix, n in LAYOUT.items() for seq in range(1, n + 1)
    ]
    keys += [f"{base}/{stray}" for stray in STRAYS]
    if scheme == "s3":
        request.getfixturevalue("s3_endpoint")
        import botocore.session

        client: Any = botocore.session.get_session().create_client("s3")
        for key in keys:
            client.put_object(Bucket=BUCKET, Key=key, Body=b"{}")
    else:
        request.getfixturevalue("gcs_endpoint")
        from google.cloud import storage

        bucket = storage.Client().bucket(BUCKET)
        for key in keys:
            bucket.blob(key).upload_from_string(b"{}")
    found = await find_memories(f"{scheme}://{BUCKET}/{base}")
    assert found == sorted(f"{scheme}://{BUCKET}/{base}/{prefix}".rstrip("/") for prefix in LAYOUT)


@pytest.mark.slow  # 26 s; the bound is held in memory above and the roll-up on moto and GCS by the test before
async def test_on_moto_a_thousand_memories_and_a_long_log_take_two_listings(s3_client: Any) -> None:
    """Listing every object took a request per 1000 keys: 5 here."""
    from bucket_memory.objects.s3 import S3ObjectStore

    base = unique_prefix()
    keys = [f"{base}/users/{number:04d}/{log_key(1)}" for number in range(1000)]
    keys += [f"{base}/users/long/{log_key(seq)}" for seq in range(1, 3001)]
    semaphore = asyncio.Semaphore(32)

    async def put(key: str) -> None:
        async with semaphore:
            await s3_client.put_object(Bucket=BUCKET, Key=key, Body=b"{}")

    await asyncio.gather(*(put(key) for key in keys))
    listings: list[str] = []
    s3_client.meta.events.register("before-call.s3.ListObjectsV2", lambda **_: listings.append("list"))
    found = await memory_prefixes(S3ObjectStore(s3_client, bucket=BUCKET, prefix=base))
    assert len(found) == 1001
    assert len(listings) == 2


async def test_a_destroyed_memory_is_not_listed_and_costs_no_request_more() -> None:
    """Was: a destroyed prefix was listed as a memory (its tombstones are at its commit keys), and
    any command on it answered `memory_deleted`. Its proof sits beside its log, in the same listing."""
    objects = PagedCount()
    _fill(objects, LAYOUT, STRAYS)
    await memory_prefixes(objects)
    before, objects.lists = objects.lists, 0
    for destroyed in ("users/1/child", "users/10"):  # what a destroy leaves beside the tombstones
        objects.objects[f"{destroyed}/{PROOF_KEY}"] = (DESTROYED, 0.0)

    assert await memory_prefixes(objects, destroyed=False) == sorted(set(LAYOUT) - {"users/10", "users/1/child"})
    assert objects.lists == before
    assert await memory_prefixes(objects) == sorted(LAYOUT)  # what fan-out reports as destroyed


async def test_a_destroyed_local_memory_is_not_listed(tmp_path: Path) -> None:
    for name in ("kept", "gone"):
        async with open_store(tmp_path / name) as store:
            await store.write("a.md", "a\n", expected=None, origin=Origin())
    async with open_store(tmp_path / "gone") as store:
        await Destroyer(store.log.objects).destroy()
    assert await find_memories(tmp_path) == [str(tmp_path / "kept")]
    assert await find_memories(tmp_path, destroyed=True) == [str(tmp_path / name) for name in ("gone", "kept")]
