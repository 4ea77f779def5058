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

from bucket_memory import LogFileStore, LogOptions, open_store
from bucket_memory.objects.interface import CREATE, Create, TransientError
from bucket_memory.objects.s3_errors import Exists, Missing
from bucket_memory.objects.s3_obstore import CreateClock, ObstoreS3ObjectStore, _mapped
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
        assert (methods["PUT"], methods["HEAD"]) == (1, 1)  # the create, then the stamp
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


async def test_a_create_answered_409_is_transient_not_taken(monkeypatch: pytest.MonkeyPatch) -> None:
    """S3 answers 409 ConditionalRequestConflict to a create racing another on the same key; obstore
    raises it as "already exists" while the key may be absent. It must not read as a lost race."""
    with answering(409, S3_CONFLICT, "application/xml") as url:
        monkeypatch.setenv("AWS_ENDPOINT_URL", url)
        monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
        monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
        objects = ObstoreS3ObjectStore(bucket="guarded-bucket", prefix="memory")
        with pytest.raises(TransientError):
            await objects.put("log/00000000000000000001.json", b"{}", CREATE)


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

    location = "s3://stand-in/memory"

    def __init__(self, skew: float, clock: CreateClock) -> None:
        self.skew, self.clock = skew, clock
        self.heads = 0
        self.objects: set[str] = set()

    async def put(self, key: str, data: bytes, mode: Create) -> None:
        self.objects.add(key)
        self.clock.created(key, time.time())

    async def delete(self, keys: list[str]) -> None:
        self.objects.difference_update(keys)

    async def last_modified(self, key: str) -> float | None:
        self.heads += 1
        return float(int(time.time() + self.skew))


@pytest.mark.parametrize("skew", [-3600.0, -30.5, -1.9, 0.0, 1.5, 30.5, 86_400.0])
async def test_the_clock_never_runs_ahead_of_the_servers(skew: float) -> None:
    """Compaction ages objects by this clock: ahead of the server's, it would delete a checkpoint a
    reader may still need. A small positive offset is taken as none (behind, so safe)."""
    clock = CreateClock()
    server = _StampingServer(skew, clock)
    await server.put("log/1.json", b"{}", CREATE)
    await server.put("log/2.json", b"{}", CREATE)
    for _ in range(3):
        now = await clock.now(server, ageing=False)  # type: ignore[arg-type]
        assert now <= time.time() + skew + 0.01  # never ahead of the server
        if abs(skew) > 3:
            assert now >= time.time() + skew - 2.0
    assert server.heads == 1  # one stamp, not one per call


async def test_ageing_before_any_create_stamps_an_object_of_its_own() -> None:
    """A process that compacts before it writes has no create to read the server's stamp from."""
    clock = CreateClock()
    server = _StampingServer(3600.0, clock)
    assert await clock.now(server, ageing=False) < time.time() + 1  # type: ignore[arg-type]
    assert server.heads == 0  # commit times need no request
    assert await clock.now(server, ageing=True) > time.time() + 3590  # type: ignore[arg-type]
    assert server.heads == 1 and server.objects == set()  # its object deleted again
    await clock.now(server, ageing=True)  # type: ignore[arg-type]
    assert server.heads == 1


async def test_an_unanswered_stamp_waits_for_the_next_create() -> None:
    class Failing(_StampingServer):
        async def last_modified(self, key: str) -> float | None:
            if self.heads == 0:
                self.heads += 1
                raise TransientError("no answer")
            return await super().last_modified(key)

    clock = CreateClock()
    server = Failing(600.0, clock)
    await server.put("log/1.json", b"{}", CREATE)
    assert await clock.now(server, ageing=False) < time.time() + 1  # type: ignore[arg-type]
    assert await clock.now(server, ageing=False) < time.time() + 1  # type: ignore[arg-type]
    assert server.heads == 1  # not one HEAD per call while it fails
    await server.put("log/2.json", b"{}", CREATE)
    assert await clock.now(server, ageing=False) > time.time() + 590  # type: ignore[arg-type]
    clock = CreateClock()
    failing = Failing(0.0, clock)
    with pytest.raises(TransientError):  # ageing never falls back to the local clock
        await clock.now(failing, ageing=True)  # type: ignore[arg-type]
    assert failing.objects == set()


def test_a_store_serves_one_asyncio_run_after_another(s3_endpoint: str) -> None:
    """A handler that calls `asyncio.run` per request: the first run's create must not leave the
    clock waiting on a task of a loop that is gone."""
    objects = ObstoreS3ObjectStore(bucket=BUCKET, prefix=unique_prefix())
    store = LogFileStore(objects)
    for number in range(3):
        asyncio.run(store.write(f"{number}.md", "x", expected=None, origin=ORIGIN))
        assert asyncio.run(objects.now(ageing=True)) > time.time() - 5


async def test_a_key_obstore_cannot_list_is_named_not_retried_for_ever(s3_endpoint: str) -> None:
    """Anyone who may put objects can put `log//x`; the default layer lists it and the log ignores
    it, obstore refuses the whole listing. That must say what to do, not look transient."""
    import botocore.session

    prefix = unique_prefix()
    botocore.session.get_session().create_client("s3").put_object(Bucket=BUCKET, Key=f"{prefix}/log//stray", Body=b"")
    with pytest.raises(MemoryStoreError) as caught:
        await ObstoreS3ObjectStore(bucket=BUCKET, prefix=prefix).list("log/")
    assert caught.value.code == "unavailable" and "remove that object" in str(caught.value)


async def test_a_bucket_in_another_region_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    body = b"<?xml version='1.0'?><Error><Code>PermanentRedirect</Code><Message>m</Message></Error>"
    with answering(301, body, "application/xml") as url:
        monkeypatch.setenv("AWS_ENDPOINT_URL", url)
        monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
        monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
        objects = ObstoreS3ObjectStore(bucket="far-bucket", prefix="memory")
        for operation in (objects.list("log/"), objects.put("log/1.json", b"{}", CREATE)):
            with pytest.raises(MemoryStoreError) as caught:
                await operation
            assert caught.value.code == "unavailable" and "AWS_REGION" in str(caught.value)


def test_a_key_refused_in_a_batch_delete_is_forbidden() -> None:
    import obstore.exceptions

    message = "DeleteObjects request failed for key log/1.json: Access Denied (code: AccessDenied)"
    mapped = _mapped(obstore.exceptions.GenericError(message), "s3://bucket/memory/log/1.json")
    assert isinstance(mapped, MemoryStoreError) and mapped.code == "forbidden"


def test_the_profile_endpoint_is_the_one_aws_cli_uses(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    import botocore.session

    from bucket_memory.objects.s3_obstore import _endpoint

    config = tmp_path / "config"
    config.write_text("[profile local]\nendpoint_url = http://127.0.0.1:9000\n")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(config))
    monkeypatch.setenv("AWS_PROFILE", "local")
    for name in ("AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_IGNORE_CONFIGURED_ENDPOINT_URLS"):
        monkeypatch.delenv(name, raising=False)
    assert _endpoint(botocore.session.get_session()) == "http://127.0.0.1:9000"
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9001")
    assert _endpoint(botocore.session.get_session()) == "http://127.0.0.1:9001"
    monkeypatch.setenv("AWS_IGNORE_CONFIGURED_ENDPOINT_URLS", "true")
    assert _endpoint(botocore.session.get_session()) is None


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
    assert isinstance(mapped, Missing | Exists | MemoryStoreError | TransientError)
    if isinstance(mapped, Exists):
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


async def test_a_cold_obstore_writer_after_a_wipe_is_refused_until_recover(s3_endpoint: str) -> None:
    """obstore lists no versions; without `has_past` a wiped memory would look new, and a cold
    writer would start a second seq 1 over the old chain's versions."""
    from bucket_memory import MemoryAdmin

    from .conftest import VERSIONED
    from .test_recover import BEFORE, files_of, wipe, written

    url = f"s3://{VERSIONED}/{unique_prefix()}"
    head = await written(url, BEFORE)
    wipe(url)
    async with open_store(url, s3_layer="obstore") as store:
        for operation in (lambda: store.write("new.md", "x", expected=None, origin=ORIGIN), store.list):
            with pytest.raises(MemoryStoreError) as caught:
                await operation()
            assert caught.value.code == "memory_deleted"
    async with open_store(url) as operator:
        await MemoryAdmin(operator).recover(None, origin=ORIGIN)
    async with open_store(url, s3_layer="obstore") as store:
        assert await files_of(store) == BEFORE
        assert await store.write("new.md", "x", expected=None, origin=ORIGIN) == str(head + 1)


async def test_making_the_version_client_is_not_held_to_a_requests_timeout(
    s3_endpoint: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """botocore parses its models when the client for `has_past` is made: on a busy machine that
    outlasts a short request timeout, which must bound only the request (CI once answered a new
    memory's first write `unavailable` so, every attempt cut off while making the client)."""
    from .conftest import VERSIONED

    objects = ObstoreS3ObjectStore(bucket=VERSIONED, prefix=unique_prefix(), request_timeout=1.0)
    make = ObstoreS3ObjectStore._botocore
    made: list[object] = []

    class AnsweredAtOnce:
        """The made client, whose one request answers without the server: a busy machine must not
        trip the test's short timeout on the request, only (if the code were wrong) on the making."""

        def __init__(self, client: Any) -> None:
            self.client = client

        def list_object_versions(self, **_: object) -> dict[str, object]:
            return {}

    def busy_machine(self: ObstoreS3ObjectStore) -> Any:
        time.sleep(1.5)  # stands for CPU the machine is slow to give, not for waiting on anything
        made.append(client := AnsweredAtOnce(make(self)))
        return client

    monkeypatch.setattr(ObstoreS3ObjectStore, "_botocore", busy_machine)
    assert await objects.has_past("log/") is False
    assert await objects.has_past("log/") is False
    assert len(made) == 1  # made once, kept


async def test_a_new_memory_on_a_versioned_bucket_is_new(s3_endpoint: str) -> None:
    from .conftest import VERSIONED

    async with open_store(f"s3://{VERSIONED}/{unique_prefix()}", s3_layer="obstore") as store:
        assert await store.write("a.md", "a", expected=None, origin=ORIGIN) == "1"


@pytest.mark.parametrize("endpoint", ["not a url", "ftp://127.0.0.1:1", "http://[::1"])
async def test_a_malformed_endpoint_is_a_store_error(endpoint: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """What obstore raises while making its client goes through the same boundary as its requests."""
    monkeypatch.setenv("AWS_ENDPOINT_URL", endpoint)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    store = LogFileStore(
        ObstoreS3ObjectStore(bucket="bucket", prefix="memory"), options=LogOptions(operation_timeout=5)
    )
    with pytest.raises(MemoryStoreError) as caught:
        await store.list()
    assert caught.value.code == "unavailable"
