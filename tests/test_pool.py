"""Many memories in one process: one cloud client per credentials and loop, a bounded pool of open stores."""

from __future__ import annotations

from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import pytest
from a13n_harness.providers.memory import Origin

from bucket_memory import LogFileStore, LogRecordStore, StorePool, open_store

from .conftest import BUCKET, unique_prefix

ORIGIN = Origin(run_id="pool")


def _shared_s3() -> dict[str, Any]:
    import asyncio

    from bucket_memory.objects import s3_clients as s3

    return s3._SHARED.get(asyncio.get_running_loop(), {})


async def test_s3_stores_open_at_once_share_one_client_closed_with_the_last(s3_endpoint: str) -> None:
    """Each open_store made a client of its own: 1.5 MB and a socket pool per memory."""
    async with AsyncExitStack() as stack:
        stores = [await stack.enter_async_context(open_store(f"s3://{BUCKET}/{unique_prefix()}")) for _ in range(20)]
        for store in stores[:3]:
            await store.list()
        clients = {id(await store.log.objects.client()) for store in stores}  # type: ignore[attr-defined]
        assert len(clients) == 1
        assert len(_shared_s3()) == 1
    assert _shared_s3() == {}  # the last store out closed it


async def test_other_credentials_get_a_client_of_their_own(s3_endpoint: str, monkeypatch: pytest.MonkeyPatch) -> None:
    first = LogFileStore.s3(bucket=BUCKET, prefix=unique_prefix())
    first_client = await first.log.objects.client()  # type: ignore[attr-defined]
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "someone-else")
    second = LogFileStore.s3(bucket=BUCKET, prefix=unique_prefix())
    assert await second.log.objects.client() is not first_client  # type: ignore[attr-defined]
    async with first, second:
        pass
    assert _shared_s3() == {}


async def test_gcs_stores_share_one_client_and_one_date_hook(gcs_endpoint: str) -> None:
    """Each store added a hook to its client's session: with a shared client every reply called
    every store's hook, and the hooks kept every store alive."""
    async with AsyncExitStack() as stack:
        stores = [await stack.enter_async_context(open_store(f"gs://{BUCKET}/{unique_prefix()}")) for _ in range(10)]
        await stores[0].write("a.md", "a", expected=None, origin=ORIGIN)
        clients = {id(store.log.objects.client) for store in stores}  # type: ignore[attr-defined]
        assert len(clients) == 1
        client = stores[0].log.objects.client  # type: ignore[attr-defined]
        assert len(client._http.hooks["response"]) == 1
        assert stores[9].log.objects.clock is stores[0].log.objects.clock  # type: ignore[attr-defined]
    from bucket_memory.objects.gcs import SHARED

    assert SHARED._held == {}


async def test_the_pool_keeps_at_most_max_stores_and_settles_what_it_evicts(tmp_path: Path) -> None:
    async with StorePool(max_stores=2) as pool:
        for name in "abc":
            async with pool.lease(tmp_path / name) as store:
                await store.write("note.md", name, expected=None, origin=ORIGIN)
        assert len(pool) == 2
        async with pool.lease(tmp_path / "a") as again:  # evicted, opened anew: a cold start reads it back
            assert (await again.read("note.md")).text == "a"
            assert again is not store
        assert len(pool) == 2


async def test_the_pool_evicts_past_max_bytes(tmp_path: Path) -> None:
    async with StorePool(max_bytes=150) as pool:
        async with pool.lease(tmp_path / "a") as first:
            await first.write("big.md", "x" * 100, expected=None, origin=ORIGIN)
        async with pool.lease(tmp_path / "b") as second:
            await second.write("big.md", "y" * 100, expected=None, origin=ORIGIN)
        assert len(pool) == 1
        assert pool.cached_bytes <= 150
        async with pool.lease(tmp_path / "b") as same:
            assert same is second  # the newest stayed warm


async def test_a_held_store_is_never_evicted(tmp_path: Path) -> None:
    async with StorePool(max_stores=1) as pool:
        async with pool.lease(tmp_path / "held") as held:
            for name in "xyz":
                async with pool.lease(tmp_path / name) as other:
                    await other.list()
            await held.write("still.md", "open", expected=None, origin=ORIGIN)
            async with pool.lease(tmp_path / "held") as same:
                assert same is held
        assert len(pool) == 1


async def test_evicting_an_s3_store_lets_go_of_the_shared_client(s3_endpoint: str) -> None:
    async with StorePool(max_stores=1) as pool:
        for _ in range(3):
            async with pool.lease(f"s3://{BUCKET}/{unique_prefix()}") as store:
                await store.write("a.md", "a", expected=None, origin=ORIGIN)
        assert len(pool) == 1
        (held,) = _shared_s3().values()
        assert held.users == 1
    assert _shared_s3() == {}


async def test_record_stores_close(s3_endpoint: str) -> None:
    async with LogRecordStore.s3(bucket=BUCKET, prefix=unique_prefix()) as records:
        await records.add("remember this")
        assert len(_shared_s3()) == 1
    assert _shared_s3() == {}


@pytest.mark.parametrize(
    ("bounds", "named"),
    [
        ({"max_stores": 0}, "max_stores"),
        ({"max_stores": -5}, "max_stores"),
        ({"max_stores": 1.5}, "max_stores"),  # was taken: the pool kept 2
        ({"max_stores": "10"}, "max_stores"),  # was a TypeError from a comparison
        ({"max_stores": True}, "max_stores"),  # was taken as 1
        ({"max_stores": None}, "max_stores"),
        ({"max_bytes": -1}, "max_bytes"),
        ({"max_bytes": float("nan")}, "max_bytes"),  # was taken: nothing compares above nan, nothing evicted
        ({"max_bytes": float("inf")}, "max_bytes"),
        ({"max_bytes": 1e6}, "max_bytes"),
        ({"max_bytes": "1 GB"}, "max_bytes"),
        ({"max_bytes": False}, "max_bytes"),
    ],
)
def test_bounds_that_are_not_whole_numbers_are_refused_naming_them(bounds: dict[str, Any], named: str) -> None:
    with pytest.raises(ValueError, match=rf"StorePool's {named} must be a whole number of at least [01], not "):
        StorePool(**bounds)


async def test_huge_bounds_hold_everything_and_zero_bytes_closes_what_is_handed_back(tmp_path: Path) -> None:
    async with StorePool(max_stores=10**18, max_bytes=10**30) as pool:
        for name in "abc":
            async with pool.lease(tmp_path / name) as store:
                await store.write("note.md", name, expected=None, origin=ORIGIN)
        assert len(pool) == 3
    async with StorePool(max_bytes=0) as pool:
        async with pool.lease(tmp_path / "empty") as empty:
            await empty.list()
        async with pool.lease(tmp_path / "a") as held:
            assert (await held.read("note.md")).text == "a"  # held: open past the bound
            assert len(pool) == 2
        assert len(pool) == 0 and pool.cached_bytes == 0  # handed back: past the bound, closed (oldest first)
