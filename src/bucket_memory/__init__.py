"""Shared file and record memory for a13n-harness agents, kept as a commit log in an S3 or GCS bucket or a directory.

Names are imported on first use: the harness's memory package alone takes most of a second to
import, which `bucket-memory --help` and `--version` need not pay.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .admin import MemoryAdmin
    from .connect import open_record_store, open_store
    from .files.store import DEFAULT_MAX_BYTES, LogFileStore
    from .log.options import LogOptions
    from .objects.interface import ObjectInfo, ObjectStore, TransientError
    from .objects.local import LocalObjectStore
    from .objects.memory import MemoryObjectStore
    from .pool import StorePool
    from .records.store import LogRecordStore

_MODULES = {
    "DEFAULT_MAX_BYTES": ".files.store",
    "LocalObjectStore": ".objects.local",
    "LogFileStore": ".files.store",
    "LogOptions": ".log.options",
    "LogRecordStore": ".records.store",
    "MemoryAdmin": ".admin",
    "MemoryObjectStore": ".objects.memory",
    "ObjectInfo": ".objects.interface",
    "ObjectStore": ".objects.interface",
    "StorePool": ".pool",
    "TransientError": ".objects.interface",
    "open_record_store": ".connect",
    "open_store": ".connect",
}

__all__ = [
    "DEFAULT_MAX_BYTES",
    "LocalObjectStore",
    "LogFileStore",
    "LogOptions",
    "LogRecordStore",
    "MemoryAdmin",
    "MemoryObjectStore",
    "ObjectInfo",
    "ObjectStore",
    "StorePool",
    "TransientError",
    "open_record_store",
    "open_store",
]


def __getattr__(name: str) -> object:
    module = _MODULES.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value
