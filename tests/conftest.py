"""Backends every contract test runs on; a factory opens another store on the same memory."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from a13n_harness.providers.memory import FileFormat

from bucket_memory import LogFileStore, LogOptions
from bucket_memory.objects import LocalObjectStore, MemoryObjectStore, ObjectStore

type StoreFactory = Callable[..., LogFileStore]

BACKENDS = ["memory", "local"]


@pytest.fixture(params=BACKENDS)
def objects(request: pytest.FixtureRequest, tmp_path: Path) -> ObjectStore:
    """One memory's objects on each backend."""
    if request.param == "memory":
        return MemoryObjectStore()
    return LocalObjectStore(tmp_path / "memory")


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
