"""A memory with other memories nested under its prefix (`orgs/acme` and `orgs/acme/users/u1`):
what its writes list of theirs (issue 57, point 6)."""

from __future__ import annotations

from typing import Any

import pytest
from a13n_harness.providers.memory import FileFormat, Origin

from bucket_memory import LogFileStore
from bucket_memory.format.wire_values import log_key, run_key
from bucket_memory.log import reader as reader_module
from bucket_memory.log.reader import LogReader
from bucket_memory.objects.interface import CREATE, ObjectInfo, ObjectStore
from bucket_memory.objects.memory import MemoryObjectStore

ORIGIN = Origin(run_id="nested")
CHILDREN = 1000


class _Listing:
    """A store whose listings are recorded: how many keys each one returned."""

    def __init__(self, inner: ObjectStore) -> None:
        self.inner, self.sizes = inner, list[int]()

    def __getattr__(self, name: str) -> object:
        return getattr(self.inner, name)

    async def list(self, prefix: str, **bounds: Any) -> list[ObjectInfo]:
        found = await self.inner.list(prefix, **bounds)
        self.sizes.append(len(found))
        return found


async def _parent_of_children(nested: str) -> tuple[MemoryObjectStore, int]:
    """A memory at the bucket's root (as `orgs/acme/` is the root of its store) with `CHILDREN`
    memories of three commits each under `nested/`; and the number of their keys."""
    child = MemoryObjectStore()
    for number in range(3):
        await LogFileStore(child).write(f"c{number}.md", "c", expected=None, origin=ORIGIN)
    objects = MemoryObjectStore()
    for user in range(CHILDREN):
        objects.objects |= {f"{nested}/u{user:04d}/{key}": value for key, value in child.objects.items()}
    await LogFileStore(objects).write("seed.md", "s", expected=None, origin=ORIGIN)
    return objects, len(objects.objects) - 1


@pytest.mark.parametrize("nested", ["users", "members", "log/users", "log/2024"])
async def test_a_contended_write_lists_a_page_whatever_lies_under_the_prefix(
    nested: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A lost race, the fleet's listing of the log's tail and pending/, and a catch-up by listing each
    take at most a page of keys per LIST and a few LISTs, with 1,000 memories nested under the
    prefix: `users/` sorts after `pending/`, `members/` between `log/` and `pending/` (both bounded
    before too), and memories at `log/users/...` or `log/2024/...` (refused as URLs, not as object
    stores: hostile or stray keys alike) lie under `log/` itself, past or among the digits of the
    store's keys. Before, a listing of `log/` took every key of the last two (3,000 here; 61,001
    with 1,000 children of 61 keys: 62 S3 pages a catch-up, 128 a contended write)."""
    monkeypatch.setattr(reader_module, "TAIL_PAGE", 100)
    objects, foreign = await _parent_of_children(nested)
    assert foreign >= 3 * CHILDREN
    listing = _Listing(objects)
    writer = LogFileStore(listing)  # type: ignore[arg-type]
    await writer.list()
    await LogFileStore(objects).write("other.md", "o", expected=None, origin=ORIGIN)  # the writer's race is lost
    writer._log.head.traffic.lost_at = writer.options.clock()  # its writes go through pending/
    listing.sizes.clear()
    await writer.write("w.md", "w", expected=None, origin=ORIGIN)
    assert max(listing.sizes) <= 100 and len(listing.sizes) <= 10, listing.sizes
    assert (await LogFileStore(objects).read("w.md")).text == "w"
    await LogFileStore(objects).write("later.md", "l", expected=None, origin=ORIGIN)
    listing.sizes.clear()
    await writer._log.head.catch_up()
    assert max(listing.sizes) <= 100 and len(listing.sizes) <= 2, listing.sizes
    assert (await writer.read("later.md")).text == "l"


async def test_the_log_listing_jumps_past_others_and_misses_no_commit(
    objects: ObjectStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Paged two keys at a time, with strays among the store's keys and memories nested under
    `log/` before, among and after them, the log's listing names every commit and run, on every
    backend (a jump past a stray that skipped a commit would prove a head that is not the newest)."""
    monkeypatch.setattr(reader_module, "TAIL_PAGE", 2)
    owned = [log_key(seq) for seq in range(1, 7)] + [run_key(4)]
    stem = log_key(3).removesuffix(".json")
    strays = [
        *(f"{stem}{tail}" for tail in (".jsoa", ".json.bak", ".json0", ".run.jsonx", "", "x/log/a.json")),
        "log/0-x/log/a.json",
        "log/000000000000000000/a.json",
        "log/-/a.json",
        *(f"log/{name}/u{user}/{log_key(1)}" for name in ("2024", "users", f"{stem[4:-1]}2x") for user in range(3)),
    ]
    for key in owned + strays:
        await objects.put(key, b"{}", CREATE)
    reader = LogReader(objects, format=FileFormat(), attempts=2)
    for after in (0, 2, 3, 6):
        commits, runs = await reader.list_log_and_runs(after=after)
        assert [seq for seq, _ in commits] == list(range(after + 1, 7)), after
        assert runs == ([4] if after < 4 else [])
