"""Shared file and record memory for a13n-harness agents, kept as a commit log in an S3 or GCS bucket or a directory."""

from .admin import MemoryAdmin
from .connect import open_record_store, open_store
from .objects import LocalObjectStore, MemoryObjectStore, ObjectInfo, ObjectStore, TransientError
from .options import LogOptions
from .records import LogRecordStore
from .store import DEFAULT_MAX_BYTES, LogFileStore

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
    "TransientError",
    "open_record_store",
    "open_store",
]
