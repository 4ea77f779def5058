"""The store people would otherwise hand-roll: one S3 object per file, the ETag as its version.

Kept only here, as a baseline: a write checks its read set with one HEAD per dependency and then
PUTs with `If-Match` (`If-None-Match: *` to create). The checks and the PUT are separate steps,
so two writers can each pass their checks before either writes: write skew.
"""

from __future__ import annotations

import asyncio
import os
from collections import Counter
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import Any

from a13n_harness.providers.memory import MemoryStoreError, Origin
from botocore.exceptions import ClientError

from bucket_memory import LogFileStore
from bucket_memory.objects.memory import MemoryObjectStore
from bucket_memory.testing.emulators import moto_server

TEXT = "- a remembered fact about the user's preferences\n" * 20


class NaiveS3Store:
    """One object per file; versions are ETags; dependencies are HEAD-checked before an If-Match PUT."""

    def __init__(self, client: Any, bucket: str) -> None:
        self.client, self.bucket = client, bucket

    async def read(self, path: str) -> tuple[str, str]:
        response = await self.client.get_object(Bucket=self.bucket, Key=path)
        async with response["Body"] as body:
            return (await body.read()).decode(), response["ETag"]

    async def list(self) -> list[tuple[str, str]]:
        page = await self.client.list_objects_v2(Bucket=self.bucket)
        return [(item["Key"], item["ETag"]) for item in page.get("Contents", ())]

    async def version(self, path: str) -> str | None:
        try:
            return str((await self.client.head_object(Bucket=self.bucket, Key=path))["ETag"])
        except ClientError:
            return None

    async def write(
        self,
        path: str,
        text: str,
        expected: str | None,
        dependencies: Mapping[str, str | None],
        checked: asyncio.Barrier | None = None,
    ) -> str:
        """`checked`, when given, is awaited between the checks and the PUT: the window other writers use."""
        for dependency, version in dependencies.items():
            if await self.version(dependency) != version:
                raise MemoryStoreError("read_conflict", f"{dependency} changed")
        if checked is not None:
            await checked.wait()
        condition = {"IfMatch": expected} if expected is not None else {"IfNoneMatch": "*"}
        try:
            response = await self.client.put_object(Bucket=self.bucket, Key=path, Body=text.encode(), **condition)
        except ClientError as error:
            raise MemoryStoreError("version_mismatch", f"{path} changed") from error
        return str(response["ETag"])

    async def delete(self, path: str, expected: str, dependencies: Mapping[str, str | None]) -> None:
        for dependency, version in dependencies.items():
            if await self.version(dependency) != version:
                raise MemoryStoreError("read_conflict", f"{dependency} changed")
        if await self.version(path) != expected:
            raise MemoryStoreError("version_mismatch", f"{path} changed")
        await self.client.delete_object(Bucket=self.bucket, Key=path)


@asynccontextmanager
async def naive_store() -> AsyncIterator[tuple[NaiveS3Store, Counter[str]]]:
    from aiobotocore.session import get_session

    with moto_server() as endpoint:
        os.environ.update(AWS_ACCESS_KEY_ID="bench", AWS_SECRET_ACCESS_KEY="bench", AWS_DEFAULT_REGION="us-east-1")
        async with get_session().create_client("s3", endpoint_url=endpoint) as client:
            await client.create_bucket(Bucket="naive")
            requests: Counter[str] = Counter()
            client.meta.events.register("before-call.s3", lambda model, **_: requests.update([model.name]))
            yield NaiveS3Store(client, "naive"), requests


async def naive_request_counts(files: int = 1000, read_set: int = 10) -> dict[str, int]:
    """Requests per operation of the naive store, with `files` files and a read set of `read_set` files."""
    async with naive_store() as (store, requests):
        versions = {f"notes/{i:05}.md": await store.write(f"notes/{i:05}.md", TEXT, None, {}) for i in range(files)}
        dependencies = dict(list(versions.items())[100 : 100 + read_set])
        counts: dict[str, int] = {}

        async def measure(name: str, operation: Any) -> Any:
            requests.clear()
            result = await operation
            counts[name] = sum(requests.values())
            return result

        await measure("read", store.read("notes/00000.md"))
        await measure("list", store.list())
        new = await measure("write", store.write("new.md", TEXT, None, dependencies))
        requests.clear()
        current_text, current = await store.read("notes/00001.md")
        await store.write("notes/00001.md", current_text + "x\n", current, dependencies)
        counts["append (read + write)"] = sum(requests.values())
        await measure("delete", store.delete("new.md", new, dependencies))
        return counts


async def demonstrate_write_skew() -> str:
    """Two agents each turn on their switch only while the other's is off, interleaved the unlucky way."""
    async with naive_store() as (store, _):
        x = await store.write("x", "off", None, {})
        y = await store.write("y", "off", None, {})
        # A and B each read both, check the other's switch, and only then write: a real race, made certain.
        both_checked = asyncio.Barrier(2)
        await asyncio.gather(
            store.write("x", "on", x, {"y": y}, both_checked), store.write("y", "on", y, {"x": x}, both_checked)
        )
        naive = {path: (await store.read(path))[0] for path in ("x", "y")}

    ours = LogFileStore(MemoryObjectStore())
    origin = Origin(run_id="skew")
    x = await ours.write("x", "off", expected=None, origin=origin)
    y = await ours.write("y", "off", expected=None, origin=origin)
    await ours.write("x", "on", expected=x, origin=origin, dependencies={"y": y})
    try:
        await ours.write("y", "on", expected=y, origin=origin, dependencies={"x": x})
        refused = "not refused (a bug)"
    except MemoryStoreError as error:
        refused = f"refused with {error.code}"
    return (
        f"the naive store let both writes through and ended with x={naive['x']}, y={naive['y']} "
        f"(both on, breaking the invariant); bucket-memory's second write was {refused}."
    )
