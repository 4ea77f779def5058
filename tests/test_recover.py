"""Recovery from bucket object versioning, after a purge and compaction and after a deleted prefix."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import pytest
from a13n_harness.providers.memory import MemoryStoreError, Origin

from bucket_memory import LogOptions, MemoryAdmin, open_store

from .conftest import VERSIONED, unique_prefix

ORIGIN = Origin(principal_id="recover-test")
COMPACT_AT_ONCE = LogOptions(grace_period=0, retain_commits=0, retain_seconds=0, checkpoint_min_commits=2)


@pytest.fixture(params=["s3", "gs"])
def versioned_url(request: pytest.FixtureRequest) -> str:
    request.getfixturevalue("s3_endpoint" if request.param == "s3" else "gcs_endpoint")
    return f"{request.param}://{VERSIONED}/{unique_prefix()}"


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
        await MemoryAdmin(store).compact()
        with pytest.raises(MemoryStoreError) as caught:
            await MemoryAdmin(store).read_at("f1.md", "2")
        assert caught.value.code == "not_found", "the live log no longer reaches before the purge"
        seq = await MemoryAdmin(store).recover(moment, origin=ORIGIN)
        assert seq == 7
        files = {entry.path: (await store.read(entry.path)).text for entry in await store.list()}
        assert files == {f"f{index}.md": f"text {index}\n" for index in range(4)}
        assert await MemoryAdmin(store).verify() == []


def test_cli_recovers_a_deleted_prefix(versioned_url: str, tmp_path: Path) -> None:
    command = str(Path(sys.executable).with_name("bucket-memory"))
    seed = tmp_path / "seed"
    seed.mkdir()
    (seed / "plan.md").write_text("the plan\n")
    (seed / "notes").mkdir()
    (seed / "notes" / "a.md").write_text("a note\n")

    def run(*arguments: str) -> str:
        done = subprocess.run([command, *arguments], capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stdout + done.stderr
        return done.stdout

    run("import", versioned_url, str(seed))
    run("cat", versioned_url, "plan.md")
    head = json.loads(run("stats", versioned_url, "--json"))["head"]
    wipe(versioned_url)
    assert json.loads(run("ls", versioned_url, "--json")) == []
    output = run("recover", versioned_url, "--as-of", "2100-01-01T00:00:00")
    assert "already" in output, "re-creating the deleted objects brought the memory back as it was"
    assert run("cat", versioned_url, "notes/a.md") == "a note\n"
    assert json.loads(run("stats", versioned_url, "--json"))["head"] == head
    assert "ok" in run("verify", versioned_url)

    # And a purged memory: recover as of the moment before the purge, as a new commit.
    moment = json.loads(run("log", versioned_url, "--json"))[0]["time"]
    asyncio.run(purge(versioned_url))
    assert json.loads(run("ls", versioned_url, "--json")) == []
    assert f"as commit {head + 2}" in run("recover", versioned_url, "--as-of", moment)
    assert run("cat", versioned_url, "plan.md") == "the plan\n"


async def purge(url: str) -> None:
    async with open_store(url) as store:
        await store.purge()


def wipe(url: str) -> None:
    """Delete every object under the prefix, as `aws s3 rm --recursive` or `gcloud storage rm` would."""
    bucket, _, prefix = url.split("://", 1)[1].partition("/")
    if url.startswith("s3://"):
        import botocore.session

        s3 = botocore.session.get_session().create_client("s3")
        keys = [item["Key"] for item in s3.list_objects_v2(Bucket=bucket, Prefix=prefix)["Contents"]]
        s3.delete_objects(Bucket=bucket, Delete={"Objects": [{"Key": key} for key in keys]})
    else:
        from google.cloud import storage

        client = storage.Client()
        for blob in client.list_blobs(bucket, prefix=prefix):
            blob.delete()
