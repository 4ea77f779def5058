"""Versioning, as the command line speaks of it: the warning for a bucket that keeps no versions
(doctor, recover, and the first write to such a bucket in a day), and the command that turns
versioning on.

A write to a bucket without versioning succeeds, but nothing it overwrites or deletes can be
brought back. A command that changes a memory on S3 or GCS reads the bucket's versioning beside
its work (one request, at the same time) unless the user's cache (`versioning.json`, beside
`identities.json`) holds an answer for that bucket younger than a day: so an unversioned bucket
is warned of once a day, and a versioned one costs no request after the first.
"""

from __future__ import annotations

import json
import os
import time
from typing import TYPE_CHECKING

from .identity import cache_path

if TYPE_CHECKING:
    from ..admin import MemoryAdmin

_FRESH_SECONDS = 86400.0  # an answer older than a day is asked again: versioning can be switched
_REMEMBERED = 64  # buckets the cache keeps


def versioning_warning(versioning: str, url: str) -> str:
    """The warning for a bucket whose versioning (its state, or "unknown") is not enabled."""
    if versioning == "unknown":
        return f"warning: cannot read the versioning of {url} (no permission); recovery depends on it."
    return (
        f"warning: versioning is {versioning} on {url}: a deleted or overwritten object cannot be brought back. "
        f"Turn it on: `bucket-memory init {bucket_of(url)} --enable-versioning`."
    )


def bucket_of(url: str) -> str:
    """The bucket of a memory's s3:// or gs:// URL, as a URL (what `init` takes)."""
    from ..objects.urls import parse_url

    found = parse_url(url)
    return f"{found.scheme}://{found.bucket}"


def _key(url: str) -> str | None:
    """The cache's name for the bucket of `url` at its endpoint (an emulator's bucket is another
    one); None off the clouds."""
    if not url.startswith(("s3://", "gs://")):
        return None
    where = os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL") or ""
    if url.startswith("gs://"):
        where = os.environ.get("STORAGE_EMULATOR_HOST", "")
    return f"{where} {bucket_of(url)}"


def to_check(url: str) -> bool:
    """Whether a change to the memory at `url` should read its bucket's versioning."""
    key = _key(url)
    if key is None:
        return False
    found = _remembered().get(key)
    return not (isinstance(found, (int, float)) and 0 <= time.time() - found < _FRESH_SECONDS)


async def warn_if_off(admin: MemoryAdmin, url: str) -> str | None:
    """The warning to print for the memory's bucket (None: versioned, or it cannot tell), the
    answer kept for a day either way."""
    from ..objects.interface import VersionedObjectStore

    if not isinstance(admin.store.objects, VersionedObjectStore):
        return None
    versioning = await admin.recovery.versioning()
    if (key := _key(url)) is not None:
        _remember(key)
    return None if versioning in ("enabled", "unknown") else versioning_warning(versioning, url)


def _remembered() -> dict[str, object]:
    try:
        found = json.loads(cache_path("versioning.json").read_text())
    except (OSError, ValueError, RecursionError):
        return {}
    return found if isinstance(found, dict) else {}


def _remember(key: str) -> None:
    kept = {name: value for name, value in _remembered().items() if name != key}
    kept[key] = time.time()
    path = cache_path("versioning.json")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        staged = path.with_suffix(f".{os.getpid()}.tmp")
        staged.write_text(json.dumps(dict(list(kept.items())[-_REMEMBERED:])))
        staged.replace(path)
    except OSError:
        return
