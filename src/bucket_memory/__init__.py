"""Shared file memory for a13n-harness agents, kept as a commit log in an S3 or GCS bucket or a directory."""

from .log import LogOptions
from .objects import LocalObjectStore, MemoryObjectStore, ObjectInfo, ObjectStore, TransientError
from .store import DEFAULT_MAX_BYTES, GCSFileStore, LocalFileStore, LogFileStore, S3FileStore, open_store

__all__ = [
    "DEFAULT_MAX_BYTES",
    "GCSFileStore",
    "LocalFileStore",
    "LocalObjectStore",
    "LogFileStore",
    "LogOptions",
    "MemoryObjectStore",
    "ObjectInfo",
    "ObjectStore",
    "S3FileStore",
    "TransientError",
    "open_store",
]
