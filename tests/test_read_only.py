"""Opening writes nothing: a role that may only read lists, reads, diffs and exports a memory, and a
read-only store refuses changes before it sends a request."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from a13n_harness.providers.memory import MemoryStoreError, Origin

from bucket_memory import MemoryAdmin, open_store
from bucket_memory.testing.proxy import fault_proxy

from .conftest import BUCKET, unique_prefix
from .helpers import cli, iam_enforced_moto

ORIGIN = Origin(run_id="read-only-test")
URL = "s3://readable/team"


def policy(*statements: dict[str, object]) -> str:
    return json.dumps({"Version": "2012-10-17", "Statement": list(statements)})


@pytest.fixture  # not module-scoped: its environment must be gone before a later test starts s3_endpoint
def reader_only() -> Iterator[dict[str, str]]:
    """A moto server enforcing IAM, a memory written by an admin, and the keys of a user who may only
    s3:GetObject on the prefix and s3:ListBucket on the bucket."""
    with iam_enforced_moto(
        "readable",
        {
            "admin": policy({"Effect": "Allow", "Action": "s3:*", "Resource": "*"}),
            "reader": policy(
                {"Effect": "Allow", "Action": "s3:GetObject", "Resource": "arn:aws:s3:::readable/team/*"},
                {"Effect": "Allow", "Action": "s3:ListBucket", "Resource": "arn:aws:s3:::readable"},
            ),
        },
    ) as act_as:
        act_as("admin")
        asyncio.run(seed())
        act_as("reader")
        yield {}


async def seed() -> None:
    async with open_store(URL) as store:
        first = await store.write("plan.md", "ship\n", expected=None, origin=ORIGIN)
        await store.write("plan.md", "ship on friday\n", expected=first, origin=ORIGIN)
        await store.write(".hidden/notes.md", "kept\n", expected=None, origin=ORIGIN)


def test_a_read_only_role_can_look_at_everything(reader_only: dict[str, str], tmp_path: Path) -> None:
    assert "plan.md" in cli("ls", URL)
    assert cli("cat", URL, "plan.md") == "ship on friday\n"
    assert cli("cat", URL, "plan.md", "--version", "1") == "ship\n"
    assert len(json.loads(cli("log", URL, "--json"))) == 3
    assert "+ship on friday" in cli("diff", URL, "plan.md", "--from", "1")
    cli("export", URL, str(tmp_path / "copy"))
    assert (tmp_path / "copy" / "plan.md").read_text() == "ship on friday\n"
    assert "ok" in cli("verify", URL)
    # A change is refused by the bucket, with the store's message.
    assert "forbidden" in cli("restore", URL, "plan.md", "--version", "1", expect=3)


async def test_opening_sends_no_request_and_read_only_refuses_before_any(s3_endpoint: str) -> None:
    async with fault_proxy(s3_endpoint, lambda number, method, path: None) as (proxy_url, proxy):
        with pytest.MonkeyPatch.context() as environment:
            environment.setenv("AWS_ENDPOINT_URL", proxy_url)
            url = f"s3://{BUCKET}/{unique_prefix()}"
            async with open_store(url, read_only=True) as store:
                assert proxy.requests == 0, "opening a store sends nothing"
                for change in (
                    lambda: store.write("a.md", "a", expected=None, origin=ORIGIN),
                    lambda: store.delete("a.md", expected="1", origin=ORIGIN),
                    lambda: store.purge(),
                    lambda: store.compact(),
                    lambda: MemoryAdmin(store).recover(None, origin=ORIGIN),
                ):
                    with pytest.raises(MemoryStoreError) as caught:
                        await change()
                    assert caught.value.code == "forbidden" and "read-only" in str(caught.value)
                assert proxy.requests == 0, "a read-only store refuses changes before any request"
                assert await store.list() == []
            assert proxy.requests > 0
