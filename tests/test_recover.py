"""Recovery from bucket object versioning: a wiped prefix (with cold, warm and unknowing writers
after it), versioning turned on late, a damaged object, and a purge with compaction."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from a13n_harness.providers.memory import MemoryStoreError, Origin

from bucket_memory import LogFileStore, LogOptions, MemoryAdmin, open_store
from bucket_memory.format.wire_values import log_key, reloads
from bucket_memory.history.chain import Problem
from bucket_memory.objects.interface import VersionedObjectStore

from .conftest import VERSIONED, unique_prefix
from .helpers import cli

ORIGIN = Origin(principal_id="recover-test")
COMPACT_AT_ONCE = LogOptions(grace_period=0, retain_commits=0, retain_seconds=0, checkpoint_min_commits=2)
CHECKPOINT_OFTEN = LogOptions(checkpoint_min_commits=2, checkpoint_max_commits=3)


@pytest.fixture(params=["s3", "gs"])
def versioned_url(request: pytest.FixtureRequest) -> str:
    request.getfixturevalue("s3_endpoint" if request.param == "s3" else "gcs_endpoint")
    return f"{request.param}://{VERSIONED}/{unique_prefix()}"


async def files_of(store: LogFileStore) -> dict[str, str]:
    return {entry.path: (await store.read(entry.path)).text for entry in await store.list()}


async def written(url: str, files: dict[str, str], options: LogOptions = CHECKPOINT_OFTEN) -> int:
    """Write each file as its own commit; the head."""
    async with open_store(url, options=options) as store:
        for path, text in files.items():
            await store.write(path, text, expected=None, origin=ORIGIN)
        return (await store.state(proven=True)).head


BEFORE = {f"notes/{n}.md": f"note {n}\n" for n in range(5)}


async def test_a_cold_writer_after_a_wipe_is_refused_until_recover(versioned_url: str) -> None:
    head = await written(versioned_url, BEFORE)
    wipe(versioned_url)
    async with open_store(versioned_url) as store:
        for operation in (
            lambda: store.write("new.md", "x", expected=None, origin=ORIGIN),
            lambda: store.list(),
        ):
            with pytest.raises(MemoryStoreError) as caught:
                await operation()
            assert caught.value.code == "memory_deleted" and "bucket-memory recover" in str(caught.value)
        done = await MemoryAdmin(store).recover(None, origin=ORIGIN)
        assert done.restoration.head == head and done.restoration.restored and not done.restoration.reapplied
        assert await files_of(store) == BEFORE
        assert await store.write("new.md", "x", expected=None, origin=ORIGIN) == str(head + 1)  # no version reused
        assert await MemoryAdmin(store).verify() == []


async def test_a_warm_writer_after_a_wipe_extends_the_chain_recover_restores(versioned_url: str) -> None:
    async with open_store(versioned_url, options=CHECKPOINT_OFTEN) as warm:
        for path, text in BEFORE.items():
            await warm.write(path, text, expected=None, origin=ORIGIN)
        await warm.settle()
        wipe(versioned_url)
        # Its cached head is current as far as it can tell: its write lands at the next seq.
        version = await warm.write("after.md", "after the wipe\n", expected=None, origin=ORIGIN)
    async with open_store(versioned_url) as cold:
        with pytest.raises(MemoryStoreError) as caught:
            await cold.list()
        assert caught.value.code == "memory_deleted"
        done = await MemoryAdmin(cold).recover(None, origin=ORIGIN)
        assert done.restoration.head == int(version) and not done.restoration.reapplied
        assert await files_of(cold) == {**BEFORE, "after.md": "after the wipe\n"}
        assert await MemoryAdmin(cold).verify() == []


async def test_a_forked_edit_is_reapplied_as_the_text_its_writer_made(versioned_url: str) -> None:
    """A stale writer's append after a wipe is stored as an edit of the text it knew, which is not
    the text the chain ends with: recover re-applies the whole text the writer made."""
    long = "".join(f"line {n} of a long note\n" for n in range(50))
    async with open_store(versioned_url) as stale:
        await stale.write("long.md", long, expected=None, origin=ORIGIN)
        version = (await stale.read("long.md")).version
        async with open_store(versioned_url) as other:
            await other.write("long.md", "a new first line\n" + long, expected=version, origin=ORIGIN)
        wipe(versioned_url)
        # Its head is a commit behind: its append lands on the wiped key after it, a fork.
        await stale.write("long.md", long + "appended\n", expected=version, origin=Origin(principal_id="stale"))
        forked = await stale.objects.get(log_key(2))
        assert forked is not None and json.loads(forked)["changes"][0]["op"] == "edit"
    async with open_store(versioned_url) as store:
        admin = MemoryAdmin(store)
        done = await admin.recover(None, origin=ORIGIN)
        assert done.restoration.reapplied == ((2, 3),)
        assert await files_of(store) == {"long.md": long + "appended\n"}
        assert (await admin.revisions("long.md"))[0].origin.principal_id == "stale"
        assert await admin.verify() == []


async def test_a_writer_committing_off_the_restored_chain_during_recover_is_kept_too(
    versioned_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The wipe race of `test_recover_while_writers_write_through_a_wipe_...`, made certain: a
    writer whose cached head is a fork commit recover has just put the chain's own commit back
    over commits again, off the restored chain, while the forks are re-applied. Recover met that
    commit as corrupt and failed; it restores again and keeps both of the writer's writes."""
    from bucket_memory.history import reapplying

    stale_origin = Origin(principal_id="stale")
    async with open_store(versioned_url) as stale:
        await stale.write("a.md", "a\n", expected=None, origin=ORIGIN)
        async with open_store(versioned_url) as other:
            await other.write("b.md", "b\n", expected=None, origin=ORIGIN)
        wipe(versioned_url)
        await stale.write("c.md", "c after the wipe\n", expected=None, origin=stale_origin)  # a fork at 2
        original = reapplying.Reapplying.commit

        async def the_writer_goes_on(self: Any, commit: Any, changes: Any) -> int | None:
            monkeypatch.setattr(reapplying.Reapplying, "commit", original)
            await stale.write("d.md", "d off the restored chain\n", expected=None, origin=stale_origin)
            return await original(self, commit, changes)

        monkeypatch.setattr(reapplying.Reapplying, "commit", the_writer_goes_on)
        async with open_store(versioned_url) as store:
            admin = MemoryAdmin(store)
            await admin.recover(None, origin=ORIGIN)
            expected = {
                "a.md": "a\n",
                "b.md": "b\n",
                "c.md": "c after the wipe\n",
                "d.md": "d off the restored chain\n",
            }
            assert await files_of(store) == expected
            assert await admin.verify() == []  # the re-applied commits reuse the stale writer's keys


async def test_commits_of_a_log_begun_after_a_wipe_are_reapplied_on_top(
    versioned_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A writer that may not list versions cannot tell the memory was deleted and starts it again."""
    head = await ghost_forks(versioned_url, monkeypatch)
    async with open_store(versioned_url) as store:
        admin = MemoryAdmin(store)
        done = await admin.recover(None, origin=ORIGIN)
        assert done.restoration.reapplied == ((1, head + 1), (2, head + 2))
        assert done.restoration.head == head + 3  # and the mark that makes processes load again
        assert await files_of(store) == {**BEFORE, "notes/0.md": "rewritten after the wipe\n", "later.md": "later\n"}
        assert (await admin.revisions("later.md"))[0].origin.principal_id == "ghost"
        assert await admin.verify() == []
        again = await admin.recover(None, origin=ORIGIN)
        assert not again.restoration.changed and again.restoration.head == head + 3


async def ghost_forks(url: str, monkeypatch: pytest.MonkeyPatch) -> int:
    """A memory of `BEFORE`, wiped, then begun again by a writer that may not list versions: two
    fork commits (notes/0.md rewritten, later.md). The head before the wipe."""
    head = await written(url, BEFORE)
    wipe(url)

    async def may_not_list_versions(self: VersionedObjectStore, prefix: str) -> bool:
        raise MemoryStoreError("forbidden", "no s3:ListBucketVersions")

    with monkeypatch.context() as unknowing:
        for backend in ("bucket_memory.objects.s3.S3ObjectStore", "bucket_memory.objects.gcs.GCSObjectStore"):
            unknowing.setattr(f"{backend}.has_past", may_not_list_versions)
        async with open_store(url) as ghost:
            await ghost.write("notes/0.md", "rewritten after the wipe\n", expected=None, origin=ORIGIN)
            await ghost.write("later.md", "later\n", expected=None, origin=Origin(principal_id="ghost"))
    return head


async def test_two_recovers_at_once_reapply_each_fork_once(versioned_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Both runs find the same two forks before either re-applies one; an agent rewrites a file
    between their re-applications. Each fork lands once, and the agent's text stays (the second run
    used to re-apply both forks again, over the agent's write)."""
    head = await ghost_forks(versioned_url, monkeypatch)
    from bucket_memory.history import reapplying

    both_found = asyncio.Barrier(2)
    first_done = asyncio.Event()
    first_taken = False  # set with no await between its test and its setting: one run takes it
    reapply = reapplying.Reapplying.commit

    async def racing(self: reapplying.Reapplying, fork: Any, changes: Any) -> int | None:
        nonlocal first_taken
        if fork.seq == 1:
            await both_found.wait()  # both runs have computed their forks
            if first_taken:  # the second run's attempt, once the first and the agent's write are done
                await first_done.wait()
                return await reapply(self, fork, changes)
            first_taken = True
            seq = await reapply(self, fork, changes)
            async with open_store(versioned_url) as agent:  # an agent writes between the runs' attempts
                current = await agent.read("notes/0.md")
                await agent.write("notes/0.md", "the agent's newer text\n", expected=current.version, origin=ORIGIN)
            first_done.set()
            return seq
        return await reapply(self, fork, changes)

    monkeypatch.setattr(reapplying.Reapplying, "commit", racing)
    async with open_store(versioned_url) as one, open_store(versioned_url) as two:
        done = await asyncio.gather(
            MemoryAdmin(one).recover(None, origin=ORIGIN), MemoryAdmin(two).recover(None, origin=ORIGIN)
        )
    reapplied = [seq for run in done for _, seq in run.restoration.reapplied if seq is not None]
    assert len(reapplied) == 2, done  # each of the two forks once, by one run or the other
    async with open_store(versioned_url) as store:
        # Two re-applications and the agent's write, and a mark to load again from each run that changed anything.
        commits = await store.reader.fetch_commits(await store.reader.list_log(after=head))
        assert len([commit for commit in commits if not reloads(commit.origin)]) == 3
        assert await files_of(store) == {**BEFORE, "notes/0.md": "the agent's newer text\n", "later.md": "later\n"}
        assert await MemoryAdmin(store).verify() == []


async def test_a_writer_cannot_forge_the_mark_of_a_reapplied_fork(versioned_url: str) -> None:
    forged = Origin(run_id="bucket-memory recover", tool_call_id="reapplies:" + "ab" * 16)
    async with open_store(versioned_url) as store:
        for attempt in (
            store.write("a.md", "x", expected=None, origin=forged),
            MemoryAdmin(store).put_files({"a.md": "x"}, replace=False, origin=forged),
        ):
            with pytest.raises(MemoryStoreError) as refused:
                await attempt
            assert refused.value.code == "invalid_text" and "reserved" in str(refused.value)
        assert await store.list() == []


async def test_a_damaged_object_is_put_back_from_its_first_version(versioned_url: str) -> None:
    head = await written(versioned_url, BEFORE, options=LogOptions())
    overwrite(versioned_url, log_key(3), b'{"not": "a commit"}')
    async with open_store(versioned_url) as store:
        with pytest.raises(MemoryStoreError) as caught:
            await store.list()
        assert "corrupt" in str(caught.value)
        done = await MemoryAdmin(store).recover(None, origin=ORIGIN)
        assert done.restoration.repaired == (log_key(3),) and done.restoration.head == head + 1  # the reload mark
        assert await files_of(store) == BEFORE
        assert await MemoryAdmin(store).verify() == []


async def test_recover_after_purge_and_compaction(versioned_url: str) -> None:
    async with open_store(versioned_url, options=COMPACT_AT_ONCE) as store:
        for index in range(4):
            await store.write(f"f{index}.md", f"text {index}\n", expected=None, origin=ORIGIN)
        await store.settle()  # with no grace period, compaction running meanwhile may delete what history lists
        moment = (await MemoryAdmin(store).history.commits())[-1].moment
        await store.purge()
        await store.write("after.md", "written after the purge\n", expected=None, origin=ORIGIN)
        # Not synchronization: S3 lists times in whole seconds and the store ages objects from the end
        # of their second, so even with no grace period an object is compacted a second after it is made.
        await asyncio.sleep(1.1)
        await store.compact()
        with pytest.raises(MemoryStoreError) as caught:
            await MemoryAdmin(store).read_at("f1.md", "2")
        assert caught.value.code == "not_found", "the live log no longer reaches before the purge"
        done = await MemoryAdmin(store).recover(moment, origin=ORIGIN)
        assert not done.restoration.changed, "compaction removed nothing recovery has to put back"
        assert done.as_of_commit == 7
        assert await files_of(store) == {f"f{index}.md": f"text {index}\n" for index in range(4)}
        assert await MemoryAdmin(store).verify() == []


def test_versioning_turned_on_late_keeps_the_first_objects(s3_endpoint: str) -> None:
    """Objects written before versioning was on are the version "null", and recovery reads them."""
    import botocore.session

    s3 = botocore.session.get_session().create_client("s3")
    bucket = f"late-{unique_prefix().rsplit('/', 1)[1]}"
    s3.create_bucket(Bucket=bucket)
    url = f"s3://{bucket}/memory"
    head = asyncio.run(written(url, dict(list(BEFORE.items())[:3])))
    s3.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
    head = asyncio.run(written(url, dict(list(BEFORE.items())[3:])))
    wipe(url)

    async def recovered() -> tuple[int, dict[str, str]]:
        async with open_store(url) as store:
            done = await MemoryAdmin(store).recover(None, origin=ORIGIN)
            return done.restoration.head, await files_of(store)

    assert asyncio.run(recovered()) == (head, BEFORE)


def test_cli_recovers_a_deleted_prefix(versioned_url: str, tmp_path: Path) -> None:
    seed = tmp_path / "seed"
    seed.mkdir()
    (seed / "plan.md").write_text("the plan\n")
    (seed / "notes").mkdir()
    (seed / "notes" / "a.md").write_text("a note\n")

    run = cli

    run("import", versioned_url, str(seed))
    head = json.loads(run("stats", versioned_url, "--json"))["head"]
    wipe(versioned_url)
    assert "memory_deleted" in run("ls", versioned_url, expect=3)
    output = run("recover", versioned_url)
    assert (
        "restored 1 deleted object: log/00000000000000000001.json" in output
        and f"whole again, up to commit {head}" in output
    )
    assert "nothing to restore" in run("recover", versioned_url)
    assert run("cat", versioned_url, "notes/a.md") == "a note\n"
    assert "ok" in run("verify", versioned_url)

    # And a purged memory: recover as of the moment before the purge, as a new commit.
    moment = json.loads(run("log", versioned_url, "--json"))[0]["time"]
    asyncio.run(purge(versioned_url))
    assert json.loads(run("ls", versioned_url, "--json")) == []
    assert "pass --yes" in run("recover", versioned_url, "--as-of", moment, expect=2)
    assert f"as commit {head + 2}" in run("recover", versioned_url, "--as-of", moment, "--yes")
    assert run("cat", versioned_url, "plan.md") == "the plan\n"


async def purge(url: str) -> None:
    async with open_store(url) as store:
        await store.purge()


def _bucket_and_prefix(url: str) -> tuple[str, str]:
    bucket, _, prefix = url.split("://", 1)[1].partition("/")
    return bucket, prefix


def wipe(url: str) -> None:
    """Delete every object under the prefix, as `aws s3 rm --recursive` or `gcloud storage rm` would."""
    bucket, prefix = _bucket_and_prefix(url)
    if url.startswith("s3://"):
        s3 = _s3()
        keys = [item["Key"] for item in s3.list_objects_v2(Bucket=bucket, Prefix=prefix)["Contents"]]
        s3.delete_objects(Bucket=bucket, Delete={"Objects": [{"Key": key} for key in keys]})
    else:
        from google.cloud import storage

        client = storage.Client()
        for blob in client.list_blobs(bucket, prefix=prefix):
            blob.delete()


def overwrite(url: str, key: str, data: bytes) -> None:
    """Replace one object unconditionally, as a stray `aws s3 cp` would."""
    bucket, prefix = _bucket_and_prefix(url)
    if url.startswith("s3://"):
        _s3().put_object(Bucket=bucket, Key=f"{prefix}/{key}", Body=data)
    else:
        from google.cloud import storage

        storage.Client().bucket(bucket).blob(f"{prefix}/{key}").upload_from_string(data)


def _s3() -> Any:
    import botocore.session

    return botocore.session.get_session().create_client("s3")


@pytest.mark.timeout(300)
def test_recover_while_writers_write_through_a_wipe_loses_no_acknowledged_write(s3_endpoint: str) -> None:
    """Three processes keep writing with warm stores while the prefix is wiped and recovered.

    A writer whose cached head is older than another's finds the next key wiped and commits there:
    a fork off the old chain, acknowledged. Recovery must re-apply every such commit. (Under load,
    recover once re-applied them past a break a fork writer's run vouched for: 1 of 10 runs failed
    verify beside two busy processes; `Reapplying` now checks the chain it plans on.)"""
    import multiprocessing

    from .races import write_through_a_wipe

    url = f"s3://{VERSIONED}/{unique_prefix()}"
    asyncio.run(written(url, BEFORE))
    writers, rounds = 3, 16
    context = multiprocessing.get_context("spawn")
    barrier = context.Barrier(writers + 1)
    results = context.Queue()
    processes = [
        context.Process(target=write_through_a_wipe, args=(barrier, results, url, f"w{index}", rounds))
        for index in range(writers)
    ]
    for process in processes:
        process.start()

    async def recovered() -> None:
        async with open_store(url) as store:
            await MemoryAdmin(store).recover(None, origin=ORIGIN)

    barrier.wait()  # all warm
    barrier.wait()  # all halfway
    wipe(url)
    barrier.wait()  # writers go on
    asyncio.run(recovered())
    collected = [results.get(timeout=240) for _ in processes]
    for process in processes:
        process.join(timeout=60)
    assert not [result for result in collected if isinstance(result, str)], collected
    asyncio.run(recovered())  # again, for anything that landed while the first run restored

    async def final() -> tuple[dict[str, str], list[Problem]]:
        async with open_store(url) as store:
            return await files_of(store), await MemoryAdmin(store).verify()

    files, problems = asyncio.run(final())
    acknowledged: dict[str, str] = dict(pair for result in collected for pair in result)
    assert problems == [], "\n".join(f"{p.key}: {p.message}" for p in problems)
    lost = {path: text for path, text in acknowledged.items() if files.get(path) != text}
    assert not lost, f"{len(lost)} of {len(acknowledged)} acknowledged writes lost: {sorted(lost)}"
    assert {path: files[path] for path in BEFORE} == BEFORE
