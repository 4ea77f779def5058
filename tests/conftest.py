"""Backends every contract test runs on, and the emulators the cloud ones talk to over HTTP.

The S3 backend reaches a moto server through the real aiobotocore client; the GCS backend reaches
fake-gcs-server through the real google-cloud-storage client. Both servers start once per session.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from a13n_harness.providers.memory import FileFormat
from hypothesis import settings

from bucket_memory import LogFileStore, LogOptions
from bucket_memory.objects.interface import ObjectStore
from bucket_memory.objects.local import LocalObjectStore
from bucket_memory.objects.memory import MemoryObjectStore
from bucket_memory.testing.emulators import fake_gcs_server, moto_server

from .helpers import point_at_moto

# Hypothesis's default 200 ms deadline per example is a wall-clock assertion: a busy machine
# failed a correct checksum test with it. Speed is measured in `make bench`, never here.
settings.register_profile("bucket-memory", deadline=None)
settings.load_profile("bucket-memory")

type StoreFactory = Callable[..., LogFileStore]

BUCKET = "bucket-memory-tests"
VERSIONED = "bucket-memory-versioned"


@pytest.fixture(scope="session")
def s3_endpoint() -> Iterator[str]:
    """A moto server with the test bucket, reachable the standard way: AWS_ENDPOINT_URL and credentials."""
    with moto_server() as url, pytest.MonkeyPatch.context() as environment:
        point_at_moto(environment, url, key="testing")
        import botocore.session

        s3 = botocore.session.get_session().create_client("s3")
        s3.create_bucket(Bucket=BUCKET)
        s3.create_bucket(Bucket=VERSIONED)
        s3.put_bucket_versioning(Bucket=VERSIONED, VersioningConfiguration={"Status": "Enabled"})
        yield url


@pytest.fixture(scope="session")
def gcs_endpoint() -> Iterator[str]:
    """A fake-gcs-server with the test bucket, reachable through STORAGE_EMULATOR_HOST."""
    with fake_gcs_server() as url, pytest.MonkeyPatch.context() as environment:
        environment.setenv("STORAGE_EMULATOR_HOST", url)
        from google.cloud import storage

        client = storage.Client()
        client.create_bucket(BUCKET)
        versioned = client.bucket(VERSIONED)
        versioned.versioning_enabled = True
        client.create_bucket(versioned)
        client.close()
        yield url


@pytest.fixture
async def s3_client(s3_endpoint: str) -> AsyncIterator[Any]:
    from aiobotocore.session import get_session

    async with get_session().create_client("s3") as client:
        yield client


@pytest.fixture
def gcs_client(gcs_endpoint: str) -> Iterator[Any]:
    from google.cloud import storage

    client = storage.Client()
    yield client
    client.close()


@pytest.fixture(autouse=True)
def _private_caches(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Caches a command keeps (who the caller is, `cli/identity.py`) go to a folder of each test's
    own: not the user's, and not another test's answer."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path_factory.mktemp("cache")))


def unique_prefix() -> str:
    return f"memories/{uuid.uuid4().hex[:12]}"


@pytest.fixture(params=["memory", "unordered", "local", "s3", "s3-obstore", "gcs"])
def objects(request: pytest.FixtureRequest, tmp_path: Path) -> ObjectStore:
    """One memory's objects on each backend ("unordered" lists like an S3 Express directory bucket;
    "s3-obstore" is moto through the `fast` extra's obstore layer)."""
    return made_objects(request.param, request, tmp_path)


def made_objects(backend: str, request: pytest.FixtureRequest, tmp_path: Path, *, bucket: str = BUCKET) -> ObjectStore:
    """A fresh prefix's objects on `backend`: the clouds' in `bucket` (obstore's always in BUCKET)."""
    match backend:
        case "memory":
            return MemoryObjectStore()
        case "unordered":
            return MemoryObjectStore(ordered_listing=False)
        case "versioned-memory":
            from bucket_memory.testing.versioned import VersionedMemoryObjectStore

            return VersionedMemoryObjectStore()
        case "local":
            return LocalObjectStore(tmp_path / "memory")
        case "s3":
            from bucket_memory.objects.s3 import S3ObjectStore

            return S3ObjectStore(request.getfixturevalue("s3_client"), bucket=bucket, prefix=unique_prefix())
        case "s3-obstore":
            from bucket_memory.objects.s3_obstore import ObstoreS3ObjectStore

            request.getfixturevalue("s3_endpoint")
            return ObstoreS3ObjectStore(bucket=BUCKET, prefix=unique_prefix())
        case _:
            from bucket_memory.objects.gcs import GCSObjectStore

            return GCSObjectStore(request.getfixturevalue("gcs_client"), bucket=bucket, prefix=unique_prefix())


@pytest.fixture
def open_memory(objects: ObjectStore) -> StoreFactory:
    """Open a new store (as another process would) on the same memory."""

    def make(
        *, format: FileFormat | None = None, options: LogOptions | None = None, max_bytes: int = 32 * 1024 * 1024
    ) -> LogFileStore:
        return LogFileStore(objects, format=format, options=options, max_bytes=max_bytes)

    return make


@pytest.fixture
def store(open_memory: StoreFactory) -> LogFileStore:
    return open_memory()


@pytest.fixture(params=["local", "s3", "gcs"])
def memory_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A URL for `open_store` naming a fresh memory on each persistent backend."""
    return fresh_memory_url(request, tmp_path)


def fresh_memory_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A fresh memory on the backend `request.param` names, its emulator started."""
    match request.param:
        case "local":
            return str(tmp_path / "memory")
        case "s3":
            request.getfixturevalue("s3_endpoint")
            return f"s3://{BUCKET}/{unique_prefix()}"
        case _:
            request.getfixturevalue("gcs_endpoint")
            return f"gs://{BUCKET}/{unique_prefix()}"
