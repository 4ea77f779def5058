"""S3 and GCS specifics through the real SDKs: request counts, URLs, and every failure mapped to a store error."""

from __future__ import annotations

import asyncio
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from a13n_harness.providers.memory import MemoryStoreError, Origin
from hypothesis import given, settings
from hypothesis import strategies as st

from bucket_memory import LogFileStore, open_store
from bucket_memory.objects.interface import CREATE
from bucket_memory.runtime.off_loop import OFF_LOOP_BYTES

from .conftest import BUCKET, unique_prefix

ORIGIN = Origin(run_id="run")


async def exercise_fresh_store(store: LogFileStore, requests: Counter[str]) -> None:
    """An uncontended write is one create; a read, list, changes or search of a fresh store is one GET."""
    await store.list()  # cold start
    requests.clear()
    version = await store.write("a.md", "alpha\n", expected=None, origin=ORIGIN)
    assert sum(requests.values()) == 1, requests
    for name, operation in (
        ("read", store.read("a.md")),
        ("list", store.list()),
        ("changes", store.changes(version)),
        ("search", store.search("alpha", regex=False, case_sensitive=False, path="", limit=5)),
        ("write", store.write("a.md", "beta\n", expected=version, origin=ORIGIN)),
    ):
        requests.clear()
        await operation
        assert sum(requests.values()) == 1, (name, requests)


async def test_s3_request_counts(s3_client: Any) -> None:
    requests: Counter[str] = Counter()

    def count(model: Any, **_: Any) -> None:
        requests[model.name] += 1

    s3_client.meta.events.register("before-call.s3", count)
    store = LogFileStore.s3(s3_client, bucket=BUCKET, prefix=unique_prefix())
    await exercise_fresh_store(store, requests)
    requests.clear()
    await store.write("b.md", "b", expected=None, origin=ORIGIN)
    assert requests == {"PutObject": 1}


async def test_stores_share_the_s3_models_botocore_parsed_once(
    s3_endpoint: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each store's client had a botocore session and so a loader of its own, which parsed S3's
    service models again: 0.2 s of CPU for every store a process opened."""
    from botocore.loaders import JSONFileLoader

    from bucket_memory.objects.s3 import S3ObjectStore

    parsed: list[str] = []
    original = JSONFileLoader.load_file

    def load_file(self: JSONFileLoader, path: str) -> Any:
        parsed.append(path)
        return original(self, path)

    monkeypatch.setattr(JSONFileLoader, "load_file", load_file)
    first = S3ObjectStore(bucket=BUCKET, prefix=unique_prefix())
    await first.get("log/00000000000000000001.json")
    await first.aclose()
    parsed.clear()
    second = S3ObjectStore(bucket=BUCKET, prefix=unique_prefix())
    assert await second.get("log/00000000000000000001.json") is None
    await second.aclose()
    assert parsed == []


async def test_gcs_request_counts(gcs_client: Any) -> None:
    requests: Counter[str] = Counter()

    def count(response: Any, *args: Any, **kwargs: Any) -> None:
        requests[response.request.method] += 1

    gcs_client._http.hooks["response"].append(count)
    store = LogFileStore.gcs(gcs_client, bucket=BUCKET, prefix=unique_prefix())
    await exercise_fresh_store(store, requests)
    requests.clear()
    await store.read("a.md")  # a fresh probe answers 404: no bucket-metadata lookup follows it
    assert requests == {"GET": 1}


@pytest.mark.parametrize("scheme", ["s3", "gs"])
async def test_a_missing_bucket_is_named(scheme: str, request: pytest.FixtureRequest) -> None:
    request.getfixturevalue("s3_endpoint" if scheme == "s3" else "gcs_endpoint")
    with pytest.raises(MemoryStoreError) as caught:
        async with open_store(f"{scheme}://no-such-bucket-here/memory") as store:
            await store.list()  # opening sends nothing: the first use meets the missing bucket
    assert caught.value.code == "unavailable"
    assert "no-such-bucket-here" in str(caught.value) and "does not exist" in str(caught.value)


async def test_a_store_on_a_missing_bucket_names_it(s3_client: Any, gcs_client: Any) -> None:
    for store in (
        LogFileStore.s3(s3_client, bucket="no-such-bucket-here", prefix="memory"),
        LogFileStore.gcs(gcs_client, bucket="no-such-bucket-here", prefix="memory"),
    ):
        for operation in (store.list(), store.write("a.md", "a", expected=None, origin=ORIGIN)):
            with pytest.raises(MemoryStoreError) as caught:
                await operation
            assert caught.value.code == "unavailable"
            assert "no-such-bucket-here" in str(caught.value)


@pytest.mark.parametrize(
    "url", ["http://example.com/x", "s3://", "s3:///prefix", "gs://bucket/p?versionId=1", "", "ftp://host/x"]
)
async def test_a_bad_url_is_refused(url: str) -> None:
    with pytest.raises(MemoryStoreError) as caught:
        async with open_store(url):
            pass
    assert caught.value.code == "invalid_path"


@contextmanager
def answering(status: int, body: bytes, content_type: str) -> Iterator[str]:
    """An HTTP endpoint that answers every request with one status, to meet the SDKs' error paths."""

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def answer(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = answer

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


S3_DENIED = b"<?xml version='1.0'?><Error><Code>AccessDenied</Code><Message>Access Denied</Message></Error>"
S3_SLOW_DOWN = b"<?xml version='1.0'?><Error><Code>SlowDown</Code><Message>Reduce your rate</Message></Error>"
S3_NOT_FOUND = b"<?xml version='1.0'?><Error><Code>NotFound</Code><Message>Not Found</Message></Error>"
S3_BAD_KEY = b"<?xml version='1.0'?><Error><Code>InvalidAccessKeyId</Code><Message>No such key</Message></Error>"
GCS_DENIED = b'{"error": {"code": 403, "message": "caller does not have storage.objects.get access"}}'
GCS_THROTTLED = b'{"error": {"code": 429, "message": "rate limit exceeded"}}'


@pytest.mark.parametrize(
    ("scheme", "status", "body", "code"),
    [
        ("s3", 403, S3_DENIED, "forbidden"),
        ("s3", 503, S3_SLOW_DOWN, "unavailable"),
        ("s3", 404, S3_NOT_FOUND, "unavailable"),
        ("s3", 403, S3_BAD_KEY, "forbidden"),
        ("gs", 403, GCS_DENIED, "forbidden"),
        ("gs", 429, GCS_THROTTLED, "unavailable"),
    ],
)
async def test_cloud_failures_become_store_errors(
    scheme: str, status: int, body: bytes, code: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    content_type = "application/xml" if scheme == "s3" else "application/json"
    with answering(status, body, content_type) as url:
        monkeypatch.setenv("AWS_ENDPOINT_URL", url)
        monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
        monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
        monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
        monkeypatch.setenv("STORAGE_EMULATOR_HOST", url)
        with pytest.raises(MemoryStoreError) as caught:
            async with open_store(f"{scheme}://guarded-bucket/memory") as store:
                await store.write("a.md", "a", expected=None, origin=ORIGIN)
    assert caught.value.code == code
    assert "guarded-bucket" in str(caught.value)


async def test_a_directory_bucket_listing_is_sorted_and_filtered_client_side() -> None:
    """S3 Express directory buckets list unordered and ignore StartAfter; moto cannot host one (it
    fails botocore's CreateSession), so a stand-in client answers with unordered pages."""
    from datetime import UTC, datetime

    from bucket_memory.objects.s3 import S3ObjectStore

    stamp = datetime(2026, 1, 1, tzinfo=UTC)
    pages = [
        {
            "Contents": [{"Key": "m/log/3", "LastModified": stamp}, {"Key": "m/log/1", "LastModified": stamp}],
            "IsTruncated": True,
            "NextContinuationToken": "next",
        },
        {"Contents": [{"Key": "m/log/2", "LastModified": stamp}], "IsTruncated": False},
    ]
    seen: list[dict[str, Any]] = []

    class DirectoryBucketClient:
        async def list_objects_v2(self, **arguments: Any) -> dict[str, Any]:
            seen.append(arguments)
            return pages[len(seen) - 1]

    store = S3ObjectStore(DirectoryBucketClient(), bucket="memory--use1-az4--x-s3", prefix="m")
    assert not store.ordered_listing
    assert [info.key for info in await store.list("log/", start_after="log/1")] == ["log/2", "log/3"]
    assert all("StartAfter" not in arguments for arguments in seen)
    assert S3ObjectStore(DirectoryBucketClient(), bucket="plain-bucket").ordered_listing


async def test_an_s3_create_that_failed_after_it_was_sent_is_transient_not_unavailable() -> None:
    """A create raises `MemoryStoreError` only when it cannot have landed (`ObjectStore`): an SDK
    failure after the request may have reached S3 (a checksum or body that failed as the reply was
    read) is transient, so the log reads the key back; one botocore raises before sending (a bad
    parameter, credentials it cannot find) stays `unavailable` (before: every BotoCoreError was)."""
    from botocore.exceptions import ChecksumError, IncompleteReadError, ParamValidationError

    from bucket_memory.objects.interface import TransientError
    from bucket_memory.objects.s3 import S3ObjectStore

    failures: list[Exception] = [
        ChecksumError(checksum_type="crc32", expected_checksum="a", actual_checksum="b"),
        IncompleteReadError(actual_bytes=1, expected_bytes=2),
        ParamValidationError(report="Key is empty"),
    ]

    class FailingClient:
        async def put_object(self, **arguments: Any) -> dict[str, Any]:
            raise failures.pop(0)

    store = S3ObjectStore(FailingClient(), bucket="bucket", prefix="m")
    for _ in range(2):
        with pytest.raises(TransientError):
            await store.put("log/00000000000000000001.json", b"{}", CREATE)
    with pytest.raises(MemoryStoreError) as refused:
        await store.put("log/00000000000000000001.json", b"{}", CREATE)
    assert refused.value.code == "unavailable"


async def test_an_s3_listing_never_makes_an_object_older_than_it_is(s3_client: Any) -> None:
    """LastModified comes in whole seconds; compaction ages objects by it, so rounding down would let
    it delete a checkpoint up to a second before its grace period ends."""
    from bucket_memory.objects.s3 import S3ObjectStore

    objects = S3ObjectStore(s3_client, bucket=BUCKET, prefix=unique_prefix())
    before = time.time()
    await objects.put("log/00000000000000000001.json", b"{}", CREATE)
    [listed] = await objects.list("log/")
    assert listed.modified >= before


@settings(max_examples=50)
@given(st.binary(max_size=4096) | st.sampled_from([b"", b"x" * (OFF_LOOP_BYTES + 1)]))
def test_the_upload_checksum_is_the_one_the_sdk_would_send(data: bytes) -> None:
    """moto accepts any CRC32 header, so the one we compute off the loop is checked against botocore's."""
    from botocore.httpchecksum import Crc32Checksum

    from bucket_memory.objects.s3 import _checksum

    expected = Crc32Checksum()
    expected.update(data)
    assert asyncio.run(_checksum(data)) == {"ChecksumCRC32": expected.b64digest()}


def test_racing_creates_of_one_key_on_moto_have_one_winner(s3_endpoint: str) -> None:
    """S3 lets exactly one of racing `If-None-Match: *` PUTs of a key succeed. moto checked, then
    wrote, unlocked: two could both succeed, the second replacing an acknowledged commit. The test
    server (`testing.moto_atomic`) locks them; every backend test relies on it."""
    import botocore.session
    from botocore.exceptions import ClientError

    s3 = botocore.session.get_session().create_client("s3")
    prefix = unique_prefix()
    barrier = threading.Barrier(8)
    won: Counter[str] = Counter()
    stored: dict[str, bytes] = {}
    refusals: list[str] = []

    def racer(number: int) -> None:
        for round_ in range(10):
            key = f"{prefix}/{round_}"
            barrier.wait()
            try:
                s3.put_object(Bucket=BUCKET, Key=key, Body=f"{number}".encode(), IfNoneMatch="*")
            except ClientError as error:
                refusals.append(error.response["Error"]["Code"])
                continue
            won[key] += 1
            stored[key] = f"{number}".encode()

    threads = [threading.Thread(target=racer, args=(number,)) for number in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert set(won.values()) == {1} and len(won) == 10, won
    assert set(refusals) == {"PreconditionFailed"} and len(refusals) == 7 * 10
    for key, body in stored.items():
        assert s3.get_object(Bucket=BUCKET, Key=key)["Body"].read() == body
