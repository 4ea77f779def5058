"""Shared file memory for a13n-harness agents, kept as a commit log in an S3 or GCS bucket or a directory."""

from .admin import MemoryAdmin
from .connect import open_store
from .log import LogOptions
from .objects import LocalObjectStore, MemoryObjectStore, ObjectInfo, ObjectStore, TransientError
from .store import DEFAULT_MAX_BYTES, LogFileStore

__all__ = [
    "DEFAULT_MAX_BYTES",
    "LocalObjectStore",
    "LogFileStore",
    "LogOptions",
    "MemoryAdmin",
    "MemoryObjectStore",
    "ObjectInfo",
    "ObjectStore",
    "TransientError",
    "open_store",
]
