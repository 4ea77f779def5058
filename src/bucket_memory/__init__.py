"""Shared file memory for a13n-harness agents, kept as a commit log in an S3 or GCS bucket or a directory."""

from .admin import MemoryAdmin
from .connect import open_store
from .objects import LocalObjectStore, MemoryObjectStore, ObjectInfo, ObjectStore, TransientError
from .options import LogOptions
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
