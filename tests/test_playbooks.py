"""Every playbook of docs/operations.md runs as written against moto, and says what its comments say.

A playbook is a `sh` block after `<!-- playbook: NAME -->`. Each line runs in bash with `MEMORY`
and `BUCKET` set, after the scenario NAME was set up here; the text after `#` is what the command
prints, with `...` for what varies, and `(exit N)` for an exit code other than 0.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from a13n_harness.providers.memory import Origin

from bucket_memory import LogOptions, MemoryAdmin, open_store
from bucket_memory.format.wire_values import log_key

from .conftest import VERSIONED, unique_prefix
from .test_read_only import URL as READABLE_URL
from .test_read_only import reader_only  # noqa: F401 - a fixture
from .test_recover import overwrite, wipe

OPERATIONS = Path(__file__).parent.parent / "docs" / "operations.md"
PLAYBOOKS = dict(re.findall(r"^<!-- playbook: (\S+) -->\n```sh\n(.*?)^```", OPERATIONS.read_text(), flags=re.S | re.M))
ORIGIN = Origin(run_id="playbook")
FIVE = {f"notes/{n}.md": f"note {n}\n" for n in range(5)}


def s3() -> Any:
    import botocore.session

    return botocore.session.get_session().create_client("s3")


async def write_each(url: str, files: dict[str, str]) -> None:
    async with open_store(url) as store:
        for path, text in files.items():
            await store.write(path, text, expected=None, origin=ORIGIN)


def wiped_with_a_warm_writer(tmp_path: Path) -> tuple[str, Callable[[], None]]:
    url = f"s3://{VERSIONED}/{unique_prefix()}"

    async def scenario() -> None:
        async with open_store(url) as warm:
            for path, text in FIVE.items():
                await warm.write(path, text, expected=None, origin=ORIGIN)
            wipe(url)
            await warm.write("after.md", "written after the wipe\n", expected=None, origin=ORIGIN)

    asyncio.run(scenario())
    return url, lambda: check_files(url, {**FIVE, "after.md": "written after the wipe\n"})


def versioning_off(tmp_path: Path) -> tuple[str, Callable[[], None]]:
    bucket = f"playbook-{unique_prefix().rsplit('/', 1)[1]}"
    s3().create_bucket(Bucket=bucket)
    url = f"s3://{bucket}/team"
    asyncio.run(write_each(url, FIVE))

    def check() -> None:
        assert s3().get_bucket_versioning(Bucket=bucket)["Status"] == "Enabled"
        wipe(url)  # and what was written before versioning is recoverable now

        async def recovered() -> None:
            async with open_store(url) as store:
                await MemoryAdmin(store).recover(None, origin=ORIGIN)

        asyncio.run(recovered())
        check_files(url, FIVE)

    return url, check


def one_damaged(tmp_path: Path) -> tuple[str, Callable[[], None]]:
    url = f"s3://{VERSIONED}/{unique_prefix()}"
    asyncio.run(write_each(url, FIVE))
    overwrite(url, log_key(3), b'{"not": "a commit"}')
    return url, lambda: check_files(url, FIVE)


def owned_bucket(tmp_path: Path) -> tuple[str, Callable[[], None]]:
    bucket = f"playbook-{unique_prefix().rsplit('/', 1)[1]}"
    client = s3()
    client.create_bucket(Bucket=bucket)
    client.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
    kms = {"SSEAlgorithm": "aws:kms", "KMSMasterKeyID": "arn:aws:kms:us-east-1:123456789012:key/owner"}
    client.put_bucket_encryption(
        Bucket=bucket, ServerSideEncryptionConfiguration={"Rules": [{"ApplyServerSideEncryptionByDefault": kms}]}
    )
    rule = {"ID": "owners-logs", "Status": "Enabled", "Filter": {"Prefix": "logs/"}, "Expiration": {"Days": 9}}
    client.put_bucket_lifecycle_configuration(Bucket=bucket, LifecycleConfiguration={"Rules": [rule]})
    statement = {"Sid": "Owners", "Effect": "Deny", "Principal": "*", "Action": "s3:DeleteBucket"}
    statement["Resource"] = f"arn:aws:s3:::{bucket}"
    client.put_bucket_policy(Bucket=bucket, Policy=json.dumps({"Version": "2012-10-17", "Statement": [statement]}))

    def check() -> None:
        rules = client.get_bucket_lifecycle_configuration(Bucket=bucket)["Rules"]
        assert sorted(rule["ID"] for rule in rules) == ["expire-noncurrent-versions", "owners-logs"]
        encryption = client.get_bucket_encryption(Bucket=bucket)["ServerSideEncryptionConfiguration"]["Rules"]
        assert encryption[0]["ApplyServerSideEncryptionByDefault"] == kms
        assert json.loads(client.get_bucket_policy(Bucket=bucket)["Policy"])["Statement"] == [statement]

    return f"s3://{bucket}/team", check


def readable(tmp_path: Path) -> tuple[str, Callable[[], None]]:
    return READABLE_URL, lambda: None


def three_files(tmp_path: Path) -> tuple[str, Callable[[], None]]:
    url = f"s3://{VERSIONED}/{unique_prefix()}"
    files = {"a.md": "a\n", ".hidden/notes.md": "kept\n", "b/c.md": "c\n"}

    async def seed() -> None:
        async with open_store(url) as store:
            await MemoryAdmin(store).put_files(files, replace=False, origin=ORIGIN)

    asyncio.run(seed())
    return url, lambda: check_files(url, files)


def a_secret(tmp_path: Path) -> tuple[str, Callable[[], None]]:
    from .test_erase import every_stored_version_at

    url = f"s3://{VERSIONED}/{unique_prefix()}"

    async def seed() -> None:
        async with open_store(url) as store:
            version = await store.write("people/alice.md", "Alice: 555-0100\n", expected=None, origin=ORIGIN)
            await store.write("people/alice.md", "Alice: 555-0100, tea\n", expected=version, origin=ORIGIN)
            await store.write("plan.md", "ship\n", expected=None, origin=ORIGIN)

    asyncio.run(seed())

    def check() -> None:
        assert not any(b"555-0100" in data for data in every_stored_version_at(url))
        check_files(url, {"plan.md": "ship\n"})

    return url, check


def a_user_and_a_neighbour(tmp_path: Path) -> tuple[str, Callable[[], None]]:
    from .test_erase import every_stored_version_at

    users = f"s3://{VERSIONED}/{unique_prefix()}/users"
    url, neighbour = f"{users}/alice", f"{users}/alice2"  # a prefix that starts alike
    asyncio.run(write_each(url, {"people/alice.md": "Alice: 555-0100\n", "plan.md": "ship\n", "tea.md": "green\n"}))
    asyncio.run(write_each(neighbour, {"people/bob.md": "Bob\n"}))

    def check() -> None:
        assert set(every_stored_version_at(f"{url}/")) == {b'{"bucket-memory":"destroyed"}\n'}
        check_files(neighbour, {"people/bob.md": "Bob\n"})

    return url, check


SCENARIOS: dict[str, Callable[[Path], tuple[str, Callable[[], None]]]] = {
    "erase": a_secret,
    "destroy": a_user_and_a_neighbour,
    "wipe": wiped_with_a_warm_writer,
    "versioning-late": versioning_off,
    "damaged": one_damaged,
    "init-existing": owned_bucket,
    "read-only": readable,
    "round-trip": three_files,
}


def check_files(url: str, expected: dict[str, str]) -> None:
    async def files() -> dict[str, str]:
        async with open_store(url, options=LogOptions()) as store:
            return {entry.path: (await store.read(entry.path)).text for entry in await store.list()}

    assert asyncio.run(files()) == expected


def test_every_playbook_has_a_scenario() -> None:
    assert set(PLAYBOOKS) == set(SCENARIOS)


# The longest (5 to 45 s each: several command processes, versioning turned on late) run in
# `make test-slow`.
SLOWEST = {"damaged", "versioning-late", "init-existing", "erase", "wipe", "read-only"}


# The read-only one last: its moto server (with IAM) replaces the session's in the environment.
@pytest.mark.parametrize(
    "name",
    [
        pytest.param(name, marks=pytest.mark.slow) if name in SLOWEST else name
        for name in sorted(SCENARIOS, key=lambda name: name == "read-only")
    ],
)
def test_playbook(name: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    request.getfixturevalue("reader_only" if name == "read-only" else "s3_endpoint")
    url, check = SCENARIOS[name](tmp_path)
    environment = {
        **os.environ,
        "MEMORY": url,
        "BUCKET": url.removeprefix("s3://").split("/", 1)[0],
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
    }
    for line in PLAYBOOKS[name].splitlines():
        command, _, said = line.partition("#")
        expected_exit = re.search(r"\(exit (\d)\)", said)
        done = subprocess.run(
            ["bash", "-c", command], capture_output=True, text=True, env=environment, cwd=tmp_path, timeout=120
        )
        output = done.stdout + done.stderr
        assert done.returncode == (int(expected_exit[1]) if expected_exit else 0), f"{command}\n{output}"
        for fragment in re.sub(r"\(exit \d\)", "", said).split("..."):
            assert fragment.strip() in output, f"{command}: {fragment.strip()!r} not in\n{output}"
    check()
