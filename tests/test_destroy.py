"""`destroy`: every version of a memory deleted, tombstones alone left, every store open on it refused,
nothing beside it touched, and a destroy stopped anywhere finished by running it again."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from a13n_harness.providers.memory import MemoryStoreError, Origin

from bucket_memory import LogFileStore, open_store
from bucket_memory.destroy import Destroyer
from bucket_memory.format.tombstone import DESTROYED
from bucket_memory.objects.bulk import DestroyableObjectStore
from bucket_memory.objects.interface import Create, ObjectStore, ObjectVersion, PutMode
from bucket_memory.testing.faults import Fault, Faults, FaultyObjectStore, Operation, SimulatedCrash
from bucket_memory.testing.versioned import VersionedMemoryObjectStore

from .conftest import VERSIONED, unique_prefix
from .helpers import cli

ORIGIN = Origin(run_id="destroy-test", principal_id="alice@example.com")
SECRET = "Alice: 555-0100"


async def _filled(objects: Any) -> LogFileStore:
    """A memory with a history: versions, a move, a delete; the store that wrote it, warm."""
    store = LogFileStore(objects)
    version = await store.write("people/alice.md", f"{SECRET}\n", expected=None, origin=ORIGIN)
    await store.write("people/alice.md", f"{SECRET}, tea\n", expected=version, origin=ORIGIN)
    plan = await store.write("plan.md", "ship\n", expected=None, origin=ORIGIN)
    moved = await store.move("plan.md", "done/plan.md", expected=plan, origin=ORIGIN)
    await store.delete("done/plan.md", expected=moved, origin=ORIGIN)
    return store


async def _left(objects: VersionedMemoryObjectStore) -> list[tuple[ObjectVersion, bytes | None]]:
    """Every stored version, delete markers included, with what it holds."""
    stored = await objects.list_stored("")
    return [(version, await objects.get_version(version.key, version.version)) for version in stored]


def _only_tombstones(left: list[tuple[ObjectVersion, bytes | None]]) -> None:
    assert left, "the seal at least is left"
    assert all(data == DESTROYED and version.current for version, data in left), left
    assert len({version.key for version, _ in left}) == len(left)  # one version a key


async def _refused(store: LogFileStore) -> None:
    with pytest.raises(MemoryStoreError) as raised:
        await store.read("people/alice.md")
    assert raised.value.code == "memory_deleted"
    assert "destroy" in str(raised.value)


async def test_destroy_leaves_tombstones_alone_and_refuses_every_store() -> None:
    objects = VersionedMemoryObjectStore()
    writer = await _filled(objects)
    reader = LogFileStore(objects)
    await reader.read("people/alice.md")  # warm, at the head
    destroyer = Destroyer(objects)
    plan = await destroyer.plan()
    assert plan.versions == len(await objects.list_stored("")) and plan.bytes > 0 and not plan.sealed

    done = await destroyer.destroy()

    left = await _left(objects)
    _only_tombstones(left)
    assert done.tombstones == len(left) - 1  # and the proof
    assert done.versions_deleted == plan.versions + done.tombstones + 1 - len(left)
    await _refused(reader)  # its probe of the next seq meets the seal
    with pytest.raises(MemoryStoreError) as raised:  # a write lands nowhere either
        await writer.write("after.md", "written after\n", expected=None, origin=ORIGIN)
    assert raised.value.code == "memory_deleted"
    await _refused(LogFileStore(objects))  # and a cold open
    assert len(await _left(objects)) == len(left)  # the refusals wrote nothing


async def test_a_warm_store_behind_the_head_is_refused() -> None:
    """A store two commits behind probes a commit key the destroy covered, not the seal: deleting the
    commits alone would answer that probe "absent" and serve its cache."""
    objects = VersionedMemoryObjectStore()
    behind = LogFileStore(objects)
    await behind.write("a.md", "a\n", expected=None, origin=ORIGIN)
    writer = LogFileStore(objects)
    await writer.write("b.md", "b\n", expected=None, origin=ORIGIN)
    await writer.write("c.md", "c\n", expected=None, origin=ORIGIN)

    await Destroyer(objects).destroy()

    with pytest.raises(MemoryStoreError) as raised:
        await behind.read("a.md")
    assert raised.value.code == "memory_deleted"


async def test_destroy_on_every_backend(objects: ObjectStore) -> None:
    """The object layer's part (put, list_stored, delete_stored) on S3, GCS, a directory and memory."""
    if not isinstance(objects, DestroyableObjectStore):
        pytest.skip("the obstore layer lists no stored versions: `destroy` opens S3 through aiobotocore")
    warm = await _filled(objects)
    planned = await Destroyer(objects).plan()
    assert planned.versions >= 5 and planned.bytes > 5 * len(SECRET)

    await Destroyer(objects).destroy()

    stored = await objects.list_stored("")
    assert len(stored) == 6 + 1 and all(version.current and version.size == len(DESTROYED) for version in stored)
    assert [await objects.get(version.key) for version in stored] == [DESTROYED] * len(stored)
    await _refused(warm)


class _RacingWriter(VersionedMemoryObjectStore):
    """A bucket where another writer commits just before the seal is created."""

    racer: LogFileStore | None = None

    async def put(self, key: str, data: bytes, mode: PutMode) -> None:
        if data == DESTROYED and isinstance(mode, Create) and self.racer is not None:  # the seal
            racer, self.racer = self.racer, None
            await racer.write("raced.md", f"{SECRET}, raced\n", expected=None, origin=ORIGIN)
        await super().put(key, data, mode)


async def test_a_commit_racing_the_seal_is_covered_and_its_writer_refused() -> None:
    objects = _RacingWriter()
    stale = await _filled(objects)  # at the head the destroy lists
    objects.racer = racer = LogFileStore(objects)
    await racer.read("people/alice.md")

    done = await Destroyer(objects).destroy()

    _only_tombstones(await _left(objects))
    assert done.seal == 7  # five commits listed, the racer's sixth passed over
    for store in (stale, racer):  # the stale one probes the racer's commit: covered, not deleted
        await _refused(store)


CRASHES: list[tuple[Operation, int, Fault]] = [
    ("create", 0, "crash_after"),  # sealed, nothing else done
    ("overwrite", 1, "crash_after"),  # part covered
    ("delete_stored", 0, "crash_before"),  # covered, nothing deleted
    ("delete_stored", 0, "crash_after"),  # done, its reply lost
]


@pytest.mark.parametrize(("operation", "nth", "fault"), CRASHES)
async def test_a_destroy_stopped_anywhere_is_refused_and_finished_by_running_again(
    operation: Operation, nth: int, fault: Fault
) -> None:
    objects = VersionedMemoryObjectStore()
    warm = await _filled(objects)
    script = lambda op, key, count: fault if (op, count) == (operation, nth) else None  # noqa: E731
    with pytest.raises((SimulatedCrash, BaseExceptionGroup)) as crashed:  # a group: it died in a task group
        await Destroyer(FaultyObjectStore(objects, Faults(script=script))).destroy()
    assert crashed.group_contains(SimulatedCrash) if isinstance(crashed.value, BaseExceptionGroup) else True

    await _refused(warm)
    await _refused(LogFileStore(objects))
    assert (await Destroyer(objects).plan()).sealed

    await Destroyer(objects).destroy()
    _only_tombstones(await _left(objects))
    again = await Destroyer(objects).destroy()  # a third run finds nothing to do
    assert (again.versions_deleted, again.tombstones) == (0, len(await _left(objects)) - 1)


async def test_a_prefix_holding_other_memories_is_refused_whole() -> None:
    objects = VersionedMemoryObjectStore()
    await _filled(objects)
    child = objects.objects.copy()
    await LogFileStore(objects).read("people/alice.md")
    objects.objects.update({f"team/{key}": value for key, value in child.items() if key.startswith("log/")})
    before = await _left(objects)

    with pytest.raises(MemoryStoreError) as raised:
        await Destroyer(objects).destroy()

    assert raised.value.code == "forbidden" and "memory://versioned/team" in str(raised.value)
    assert await _left(objects) == before


async def test_nothing_there_is_not_found() -> None:
    with pytest.raises(MemoryStoreError) as raised:
        await Destroyer(VersionedMemoryObjectStore()).plan()
    assert raised.value.code == "not_found"


def _versions_under(client: Any, prefix: str) -> list[tuple[str, str, bytes]]:
    listed = client.list_object_versions(Bucket=VERSIONED, Prefix=prefix)
    found = [(item["Key"], "marker", b"") for item in listed.get("DeleteMarkers", [])]
    for item in listed.get("Versions", []):
        body = client.get_object(Bucket=VERSIONED, Key=item["Key"], VersionId=item["VersionId"])["Body"].read()
        found.append((item["Key"], item["VersionId"], body))
    assert not listed.get("IsTruncated")
    return sorted(found)


def test_destroy_on_s3_deletes_every_version_and_nothing_beside(s3_endpoint: str) -> None:
    import botocore.session

    client: Any = botocore.session.get_session().create_client("s3")
    base = unique_prefix()
    target, sibling = f"{base}/users/a", f"{base}/users/ab"  # the sibling's prefix starts alike

    async def seed() -> None:
        async with open_store(f"s3://{VERSIONED}/{sibling}") as store:
            await store.write("people/bob.md", "Bob\n", expected=None, origin=ORIGIN)
        async with open_store(f"s3://{VERSIONED}/{target}") as store:
            await _filled(store.objects)

    asyncio.run(seed())
    client.delete_object(Bucket=VERSIONED, Key=f"{target}/checkpoints/{'0' * 19}9.json")  # a delete marker
    beside = _versions_under(client, f"{sibling}/")
    url = f"s3://{VERSIONED}/{target}"

    cli("destroy", url, expect=2)  # off a terminal, without --yes: nothing changed
    assert "'..' segment" in cli("destroy", f"s3://{VERSIONED}/{target}/../ab", expect=2)  # refused as given
    said = cli("destroy", url, "--yes")

    left = _versions_under(client, f"{target}/")
    assert {body for _, _, body in left} == {DESTROYED}, left
    assert not any(b"555-0100" in body or b"alice" in body for _, _, body in left)
    assert f"{len(left) - 1} tombstones left with the operator's proof of the destroy" in said
    assert _versions_under(client, f"{sibling}/") == beside
    assert "was destroyed" in cli("cat", url, "people/alice.md", expect=3)
    assert "Bob" in cli("cat", f"s3://{VERSIONED}/{sibling}", "people/bob.md")
    assert "0 stored versions (0 bytes) deleted" in cli("destroy", url, "--yes")  # again: nothing more to do


async def test_a_destroyed_memory_under_the_prefix_is_no_other_memory(tmp_path: Path) -> None:
    """Was: a parent whose child memory had been destroyed was refused for good, naming the child."""
    for name in ("parent", "parent/child"):
        async with open_store(tmp_path / name) as store:
            await store.write("a.md", "a\n", expected=None, origin=ORIGIN)
    async with open_store(tmp_path / "parent/child") as child:
        await Destroyer(child.objects).destroy()
    async with open_store(tmp_path / "parent") as parent:
        await Destroyer(parent.objects).destroy()
        await _refused(LogFileStore(parent.objects))
