"""Memory URLs: `s3://bucket/prefix`, `gs://bucket/prefix`, `file:///abs/path` or a plain path."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Literal
from urllib.parse import unquote, urlsplit

from a13n_harness.providers.memory import MemoryStoreError

from ..format.wire_values import RESERVED_FOLDERS, key_seq


@dataclass(frozen=True, slots=True)
class MemoryUrl:
    """Where a memory lives: a bucket and key prefix on S3 or GCS, or a local directory (`path`)."""

    scheme: Literal["s3", "gs", "file"]
    bucket: str = ""
    prefix: str = ""
    path: Path | None = None


def parse_url(url: str | os.PathLike[str]) -> MemoryUrl:
    """The memory a URL names, or `invalid_path` saying which forms are accepted."""
    text = os.fspath(url)
    if "\x00" in text:
        raise MemoryStoreError("invalid_path", f"{text!r}: a URL or path has no NUL character.")
    try:
        parts = urlsplit(text)
    except ValueError as error:  # such as an unclosed "[" where a host would be
        raise MemoryStoreError("invalid_path", f"{text}: not a URL ({error}).") from None
    if parts.scheme in ("s3", "gs"):
        if not parts.netloc or parts.query or parts.fragment:
            raise MemoryStoreError(
                "invalid_path", f"{text}: a bucket URL is {parts.scheme}://bucket/prefix, with no query or fragment."
            )
        prefix = unquote(parts.path).strip("/")
        check_prefix(prefix, f"{parts.scheme}://{parts.netloc}")
        return MemoryUrl(parts.scheme, bucket=parts.netloc, prefix=prefix)  # type: ignore[arg-type]
    if parts.scheme == "file":
        if parts.netloc not in ("", "localhost"):
            raise MemoryStoreError("invalid_path", f"{text}: a file URL names a local path, as file:///abs/path.")
        return MemoryUrl("file", path=Path(unquote(parts.path)))
    if parts.scheme and len(parts.scheme) > 1:  # one letter is a Windows drive, not a scheme
        raise MemoryStoreError(
            "invalid_path",
            f"{text}: unsupported scheme {parts.scheme!r}; use s3://bucket/prefix, gs://bucket/prefix, "
            "file:///abs/path or a plain path.",
        )
    if not text:
        raise MemoryStoreError("invalid_path", "An empty URL names no memory; give a path or s3:// / gs:// URL.")
    return MemoryUrl("file", path=Path(text))


def check_prefix(prefix: str, bucket_url: str) -> None:
    """Refuse a key prefix with a relative segment (. or ..), or inside the folders a memory keeps
    its objects in.

    A memory at `P` owns `P/log/` and `P/checkpoints/`; one opened at `P/log` would put its objects
    among them. Readers ignore keys they do not own, so nothing breaks, but the mix-up is refused.
    """
    segments = prefix.split("/") if prefix else []
    for index, segment in enumerate(segments):
        if segment in (".", ".."):  # a key, not a path: S3 and GCS keep the segment, clients may not
            raise MemoryStoreError(
                "invalid_path",
                f"{bucket_url}/{prefix} has a {segment!r} segment: a prefix names its folders whole "
                f"({bucket_url}/teams/blue, never {bucket_url}/teams/../blue).",
            )
        if segment in RESERVED_FOLDERS:
            owner = "/".join(segments[:index])
            raise MemoryStoreError(
                "invalid_path",
                f"{bucket_url}/{prefix} lies inside {segment}/, a folder reserved for the objects of a memory at "
                f"{bucket_url}/{owner}".rstrip("/")
                + f"; choose a prefix with no {' or '.join(RESERVED_FOLDERS)} segment.",
            )


def check_directory(root: Path) -> None:
    """Refuse a local directory inside another local memory's log/ or checkpoints/ folder (whether
    or not that folder holds objects yet: a memory at P that has not checkpointed still owns
    P/checkpoints/), and a new memory whose log/ or checkpoints/ folder is itself a memory (its
    first commit would put that memory inside this one's objects). A memory that already holds
    objects opens whatever lies below it: its readers ignore keys they do not own."""
    absolute = root.absolute()
    for folder in (absolute, *absolute.parents):
        if folder.name in RESERVED_FOLDERS and (_holds_objects(folder) or _is_memory(folder.parent)):
            raise MemoryStoreError(
                "invalid_path",
                f"{root} lies inside {folder}, where the memory at {folder.parent} keeps its objects; "
                "choose a directory outside it.",
            )
    if _is_memory(absolute):
        return
    for name in RESERVED_FOLDERS:
        inner = absolute / name
        if _is_memory(inner):
            raise MemoryStoreError(
                "invalid_path",
                f"{inner} holds a memory of its own, whose objects a memory at {root} would be mixed with; "
                f"choose another directory, or move that memory out of {name}/.",
            )


def _is_memory(folder: Path) -> bool:
    return any(_holds_objects(folder / reserved) for reserved in RESERVED_FOLDERS)


def _holds_objects(folder: Path) -> bool:
    try:
        with os.scandir(folder) as entries:
            return any(key_seq(f"{folder.name}/{entry.name}") is not None for entry in entries)
    except OSError:
        return False
