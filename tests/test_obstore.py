"""The `fast` extra's S3 layer (obstore) held to the aiobotocore layer: the same requests, the same
error codes for the same replies, credentials from the same chain, and a clock that never runs
ahead of the server's. The contract, fault-proxy and linearizability suites run on it too
("s3-obstore" in their backends)."""

from __future__ import annotations

import asyncio
import builtins
import time
from collections import Counter
from typing import Any

import pytest
from a13n_harness.providers.memory import MemoryStoreError, Origin
from hypothesis import given
from hypothesis import strategies as st

from bucket_memory import LogFileStore, open_store
from bucket_memory.objects import TransientError
from bucket_memory.s3_obstore import CreateClock, ObstoreS3ObjectStore, _Exists, _mapped, _Missing
from bucket_memory.testing.proxy import fault_proxy

from .conftest import BUCKET, unique_prefix
from .test_cloud import S3_BAD_KEY, S3_DENIED, S3_NOT_FOUND, S3_SLOW_DOWN, answering, exercise_fresh_store

ORIGIN = Origin(run_id="obstore")
LAYERS = ["aiobotocore", "obstore"]
S3_CONFLICT = b"<?xml version='1.0'?><Error><Code>ConditionalRequestConflict</Code><Message>try again</Message></Error>"
S3_NO_BUCKET = b"<?xml version='1.0'?><Error><Code>NoSuchBucket</Code><Message>none</Message></Error>"


async def test_each_operation_is_the_requests_aiobotocore_sends(
    s3_endpoint: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An uncontended write one PUT, a fresh read one GET; the clock's one HEAD after the first create."""
    methods: Counter[str] = Counter()

    def count(number: int, method: str, path: str) -> None:
        methods[method] += 1

    async with fault_proxy(s3_endpoint, count) as (url, _):
        monkeypatch.setenv("AWS_ENDPOINT_URL", url)
        objects = ObstoreS3ObjectStore(bucket=BUCKET, prefix=unique_prefix())
        await LogFileStore(objects).write("setup.md", "x", expected=None, origin=ORIGIN)
        await objects.now()  # the clock stamped the first create
        assert methods == {"GET": 2, "PUT": 1, "HEAD": 1}  # the cold open's probes, the create, the stamp
        await exercise_fresh_store(LogFileStore(objects), methods)  # a new store over the stamped layer


@pytest.mark.parametrize("layer", LAYERS)
@pytest.mark.parametrize(
    ("status", "body", "code"),
    [
        (403, S3_DENIED, "forbidden"),
        (403, S3_BAD_KEY, "forbidden"),
        (503, S3_SLOW_DOWN, "unavailable"),
        (404, S3_NOT_FOUND, "unavailable"),
        (404, S3_NO_BUCKET, "unavailable"),
        (409, S3_CONFLICT, "unavailable"),
        (400, b"<Error><Code>InvalidRequest</Code></Error>", "unavailable"),
        (500, b"not xml at all <Code>", "unavailable"),
    ],
)
async def test_both_layers_map_a_reply_to_the_same_code(
    layer: str, status: int, body: bytes, code: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with answering(status, body, "application/xml") as url:
        monkeypatch.setenv("AWS_ENDPOINT_URL", url)
        monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
        monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
        monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
        with pytest.raises(MemoryStoreError) as caught:
            async with open_store("s3://guarded-bucket/memory", s3_layer=layer) as store:  # type: ignore[arg-type]
                await store.list()
    assert caught.value.code == code
    assert "guarded-bucket" in str(caught.value)
    assert "Debug source" not in str(caught.value) and "Traceback" not in str(caught.value)


@pytest.mark.parametrize("layer", LAYERS)
async def test_a_create_answered_409_is_unconfirmed_on_both_layers(layer: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """S3 answers 409 ConditionalRequestConflict to a create racing another on the same key; obstore
    raises it as "already exists" while the key may be absent. It must not read as a lost race."""
    with answering(409, S3_CONFLICT, "application/xml") as url:
        monkeypatch.setenv("AWS_ENDPOINT_URL", url)
        objects = ObstoreS3ObjectStore(bucket="guarded-bucket", prefix="memory")
        with pytest.raises(TransientError):
            await objects.create("log/00000000000000000001.json", b"{}")


async def test_a_missing_bucket_is_named_for_every_operation(s3_endpoint: str) -> None:
    objects = ObstoreS3ObjectStore(bucket="no-such-bucket-here", prefix="memory")
    store = LogFileStore(objects)
    for operation in (store.list(), store.write("a.md", "a", expected=None, origin=ORIGIN)):
        with pytest.raises(MemoryStoreError) as caught:
            await operation
        assert caught.value.code == "unavailable"
        assert "no-such-bucket-here" in str(caught.value) and "does not exist" in str(caught.value)
    with pytest.raises(MemoryStoreError, match="does not exist"):
        await objects.delete(["log/00000000000000000001.json"])


async def test_credentials_come_from_the_standard_chain(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    monkeypatch.setenv("AWS_PROFILE", "no-such-profile-here")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    with pytest.raises(MemoryStoreError) as caught:
        async with open_store("s3://bucket/memory", s3_layer="obstore") as store:
            await store.list()
    assert caught.value.code == "forbidden" and "no-such-profile-here" in str(caught.value)
    for name in ("AWS_PROFILE", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    with pytest.raises(MemoryStoreError) as caught:
        await ObstoreS3ObjectStore(bucket="bucket", prefix="memory").get("log/00000000000000000001.json")
    assert caught.value.code == "forbidden" and "No AWS credentials" in str(caught.value)


async def test_a_profile_from_the_config_files_reaches_moto(
    s3_endpoint: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    """A developer's named profile works as with aws-cli: obstore alone reads only the environment."""
    credentials = tmp_path / "credentials"
    credentials.write_text("[dev]\naws_access_key_id = testing\naws_secret_access_key = testing\n")
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(credentials))
    monkeypatch.setenv("AWS_PROFILE", "dev")
    url = f"s3://{BUCKET}/{unique_prefix()}"
    async with open_store(url, s3_layer="obstore") as store:
        await store.write("a.md", "through a profile", expected=None, origin=ORIGIN)
    async with open_store(url) as store:
        assert (await store.read("a.md")).text == "through a profile"


async def test_an_unknown_layer_is_refused() -> None:
    with pytest.raises(MemoryStoreError, match="Unknown S3 layer"):
        async with open_store("s3://bucket/memory", s3_layer="boto2"):  # type: ignore[arg-type]
            pass


class _StampingServer:
    """Stands in for the store: the server's clock runs `skew` seconds from ours, and stamps
    objects in whole seconds, as S3's Last-Modified does."""

    def __init__(self, skew: float) -> None:
        self.skew = skew
        self.heads = 0

    async def last_modified(self, key: str) -> float | None:
        self.heads += 1
        return float(int(time.time() + self.skew))


@pytest.mark.parametrize("skew", [-3600.0, -30.5, 0.0, 1.5, 30.5, 86_400.0])
async def test_the_clock_never_runs_ahead_of_the_servers(skew: float) -> None:
    """Compaction ages objects by this clock: ahead of the server's, it would delete a checkpoint a
    reader may still need. Within two seconds the local clock is kept, as for the Date header."""
    clock, server = CreateClock(), _StampingServer(skew)
    answered = time.time()
    clock.created("log/1.json", answered, server)  # type: ignore[arg-type]
    clock.created("log/2.json", answered, server)  # type: ignore[arg-type]
    now = await clock.now()
    assert now <= time.time() + max(skew, 0.0) + 0.01  # never ahead of the server (nor of local time within 2 s)
    if abs(skew) > 3:
        assert now >= time.time() + skew - 2.0
    assert server.heads == 1  # once per process


async def test_an_unanswered_stamp_is_tried_again_on_the_next_create() -> None:
    class Failing(_StampingServer):
        async def last_modified(self, key: str) -> float | None:
            if self.heads == 0:
                self.heads += 1
                raise TransientError("no answer")
            return await super().last_modified(key)

    clock, server = CreateClock(), Failing(600.0)
    clock.created("log/1.json", time.time(), server)  # type: ignore[arg-type]
    assert await clock.now() < time.time() + 1  # the local clock until a stamp is read
    clock.created("log/2.json", time.time(), server)  # type: ignore[arg-type]
    assert await clock.now() > time.time() + 590
    assert server.heads == 2


_ERRORS = st.sampled_from(
    ["GenericError", "NotFoundError", "FileNotFoundError", "AlreadyExistsError", "PreconditionError", "ValueError"]
)


@given(
    kind=_ERRORS,
    status=st.none() | st.integers(100, 599),
    code=st.none() | st.text(max_size=80),
    noise=st.text(max_size=400),
)
def test_any_failure_obstore_raises_is_mapped(kind: str, status: int | None, code: str | None, noise: str) -> None:
    """Whatever the message holds (a status, an S3 code, markup, nothing), the answer is one of the
    four the log understands, and a store error's message is bounded and names the location."""
    import obstore.exceptions

    error_type = getattr(obstore.exceptions, kind, None) or getattr(builtins, kind)
    message = noise
    if status is not None:
        message += f" Server returned non-2xx status code: {status} Reason: <Error><Code>{code or ''}</Code>"
    mapped = _mapped(error_type(message), "s3://bucket/prefix/log/1.json")
    assert isinstance(mapped, _Missing | _Exists | MemoryStoreError | TransientError)
    if isinstance(mapped, _Exists):
        assert status == 412
    if isinstance(mapped, MemoryStoreError):
        assert "bucket" in str(mapped) and len(str(mapped)) < 700
    if isinstance(mapped, TransientError):
        assert len(str(mapped)) < 500


async def test_a_request_timeout_is_transient_and_releases_the_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    """obstore runs requests on its own runtime; the store's deadline still ends the await."""
    import socket

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)  # accepts connections and never answers
    try:
        monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://127.0.0.1:{listener.getsockname()[1]}")
        monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
        monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
        objects = ObstoreS3ObjectStore(bucket="silent-bucket", prefix="memory", request_timeout=0.3)
        ticks = 0

        async def ticking() -> None:
            nonlocal ticks
            while True:
                await asyncio.sleep(0.01)
                ticks += 1

        ticker = asyncio.create_task(ticking())
        with pytest.raises(TransientError):
            await objects.get("log/00000000000000000001.json")
        ticker.cancel()
        assert ticks > 0  # the loop ran while the request waited
    finally:
        listener.close()
