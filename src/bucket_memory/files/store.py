"""The harness `FileStore` and `SearchableFileStore` contract over a commit log, on any object store."""

from __future__ import annotations

import bisect
import builtins
import operator
import os
from collections.abc import Mapping
from typing import Any, Self

from a13n_harness.providers.memory import (
    Changes,
    FileEntry,
    FileFormat,
    FileText,
    FullResync,
    GrepMatch,
    MemoryStoreError,
    Origin,
    validate_directory,
)

from ..fleet.fleet import Fleet
from ..format.changes import Purge
from ..format.wire_values import checked_origin, checked_path
from ..log.commit_log import CommitLog
from ..log.housekeeping import Compaction, Housekeeper
from ..log.options import LogOptions
from ..objects.interface import ObjectStore
from ..objects.local import LocalObjectStore
from ..runtime.telemetry import traced
from ..state.change_feed import changes_since, feed
from ..state.live_file import LiveFile
from ..state.operations import (
    DeleteOp,
    MoveOp,
    WriteOp,
    checked_size,
    dependencies_of,
    file_text,
    version_of,
)
from ..state.state import State, texts_of
from .seam import LogSeam
from .search import search_files

DEFAULT_MAX_BYTES = 32 * 1024 * 1024


class LogFileStore(LogSeam):
    """One memory kept as a commit log on an object store; the harness file memory contract.

    Versions are the seqs of the commits that last wrote each file, as decimal strings, and the
    change cursor names the head seq and the memory. Every mutation validates `dependencies`,
    then `expected`, against the head and commits with one conditional create. Live content is
    capped at `max_bytes` (`memory_full`). A `read_only` store refuses every change (`forbidden`)
    before it sends a request. `local`, `s3` and `gcs` build one on each backend; `aclose` (or
    `async with`) settles it and lets go of its client.
    """

    def __init__(
        self,
        objects: ObjectStore,
        *,
        format: FileFormat | None = None,
        options: LogOptions | None = None,
        max_bytes: int = DEFAULT_MAX_BYTES,
        read_only: bool = False,
    ) -> None:
        self.format = format or FileFormat()
        self.max_bytes = max_bytes
        self._log = CommitLog(objects, format=self.format, options=options, read_only=read_only)
        self.housekeeper = Housekeeper(self._log)
        self.fleet = Fleet(self._log, max_bytes=max_bytes)
        self._listing = _Listing()

    @classmethod
    def local(cls, root: str | os.PathLike[str], **settings: Any) -> LogFileStore:
        """A memory in a local directory, in the same layout as under a bucket prefix: the embedded
        default, safe across processes on one machine, and a way to open a copy made with
        `aws s3 sync` or `gcloud storage rsync`."""
        return cls(LocalObjectStore(root), **settings)

    @classmethod
    def s3(
        cls, client: Any = None, *, bucket: str, prefix: str = "", request_timeout: float = 30.0, **settings: Any
    ) -> LogFileStore:
        """A memory under `s3://bucket/prefix`, through the caller's aiobotocore client (used on its
        event loop only) or, without one, clients the store makes per event loop."""
        from ..objects.s3 import S3ObjectStore

        return cls(S3ObjectStore(client, bucket=bucket, prefix=prefix, request_timeout=request_timeout), **settings)

    @classmethod
    def gcs(
        cls, client: Any, *, bucket: str, prefix: str = "", request_timeout: float = 30.0, **settings: Any
    ) -> LogFileStore:
        """A memory under `gs://bucket/prefix` through a google-cloud-storage client that the caller owns."""
        from ..objects.gcs import GCSObjectStore

        return cls(GCSObjectStore(client, bucket=bucket, prefix=prefix, request_timeout=request_timeout), **settings)

    @property
    def location(self) -> str:
        return self._log.location

    async def begun(self) -> bool:
        """Whether a memory was ever written here and is not deleted (`CommitLog.begun`)."""
        return await self._log.begun()

    async def compact(self) -> Compaction:
        """Delete objects below the newest checkpoint older than the grace period, outside the retention."""
        return await self.housekeeper.compact()

    async def settle(self) -> None:
        """Wait for the checkpoint, compaction and intent deletions that earlier writes started."""
        await self._log.settle()
        await self.fleet.settle()

    async def aclose(self) -> None:
        """Settle, then let go of the object store's cloud client (a shared one closes with the
        last store holding it). A store used again after this takes a client again."""
        await self.settle()
        close = getattr(self._log.objects, "aclose", None)
        if close is not None:
            await close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    @traced("list")
    async def list(self) -> list[FileEntry]:
        return self._listing.of(await self._log.fresh_state())

    @traced("read")
    async def read(self, path: str) -> FileText:
        path = checked_path(path, self.format)
        current = file_text(await self._log.fresh_state(), path)
        if current is None:
            raise MemoryStoreError("not_found", f"{path} does not exist.")
        return current

    @traced("write")
    async def write(
        self,
        path: str,
        text: str,
        *,
        expected: str | None,
        origin: Origin,
        dependencies: Mapping[str, str | None] | None = None,
    ) -> str:
        path = checked_path(path, self.format)
        checked_size(text, self.format)
        operation = WriteOp(
            path=path,
            text=text,
            expected=version_of(expected),
            dependencies=self._dependencies(dependencies),
            max_bytes=self.max_bytes,
        )
        done = await self.fleet.submit(operation, checked_origin(origin))
        return str(done)

    @traced("move")
    async def move(
        self,
        source: str,
        destination: str,
        *,
        expected: str,
        origin: Origin,
        dependencies: Mapping[str, str | None] | None = None,
    ) -> str:
        operation = MoveOp(
            source=checked_path(source, self.format),
            destination=checked_path(destination, self.format),
            expected=version_of(expected),
            dependencies=self._dependencies(dependencies),
            max_bytes=self.max_bytes,
        )
        return str(await self.fleet.submit(operation, checked_origin(origin)))

    @traced("delete")
    async def delete(
        self,
        path: str,
        *,
        expected: str,
        origin: Origin,
        dependencies: Mapping[str, str | None] | None = None,
    ) -> None:
        operation = DeleteOp(
            path=checked_path(path, self.format),
            expected=version_of(expected),
            dependencies=self._dependencies(dependencies),
            max_bytes=self.max_bytes,
        )
        await self.fleet.submit(operation, checked_origin(origin))

    @traced("changes")
    async def changes(self, since: str | None) -> Changes | FullResync:
        return feed(await self._log.fresh_state(), since if isinstance(since, str) else None)

    @traced("purge")
    async def purge(self) -> None:
        await self.commit(lambda state: (Purge(),), Origin(run_id="bucket-memory:purge"))

    @traced("search")
    async def search(
        self, pattern: str, *, regex: bool, case_sensitive: bool, path: str, limit: int
    ) -> tuple[builtins.list[GrepMatch], bool]:
        directory = validate_directory(path, self.format)
        state = await self._log.fresh_state()
        chosen = [(name, live) for name, live in sorted(state.files.items()) if name.startswith(directory)]
        texts = await texts_of(chosen, state.live_bytes)
        files = [(name, texts[name], str(live.version)) for name, live in chosen]
        return await search_files(pattern, is_regex=regex, case_sensitive=case_sensitive, files=files, limit=limit)

    def _dependencies(self, dependencies: Mapping[str, str | None] | None) -> tuple[tuple[str, str | None], ...]:
        return dependencies_of(
            {checked_path(path, self.format): version for path, version in (dependencies or {}).items()}
        )


class _Listing:
    """A state's file entries in path order, brought up to date from the change feed, not rebuilt.

    A listing after a write then costs the changed paths and one copy of the list, not a sort (or
    a lookup) of every file.
    """

    def __init__(self) -> None:
        self.head: int | None = None  # None: nothing listed yet
        self.genesis: str | None = None
        self.lineage: object = None  # the load of the state listed (`State.lineage`)
        self.paths: builtins.list[str] = []  # sorted
        self.entries: builtins.list[FileEntry] = []  # the entry of each of `paths`, in its place

    def of(self, state: State) -> builtins.list[FileEntry]:
        # A later state of the same load tells what changed since our head (None when it cannot). A
        # state loaded again may be of another chain at the same seqs (after `recover` replaced the
        # commits a process had applied, seed 475): it is listed whole.
        same = self.head is not None and state.genesis == self.genesis and state.lineage is self.lineage
        changed = changes_since(state, self.head) if same and self.head is not None else None
        if changed is None:
            files = sorted(state.files.items(), key=operator.itemgetter(0))  # a packed state's files made at once
            self.paths = [path for path, _ in files]
            self.entries = [_entry(path, live) for path, live in files]
        for path in changed or ():
            live = state.files.get(path)
            place = bisect.bisect_left(self.paths, path)
            listed = place < len(self.paths) and self.paths[place] == path
            if live is None:
                if listed:
                    del self.paths[place], self.entries[place]
            elif listed:
                self.entries[place] = _entry(path, live)
            else:
                self.paths.insert(place, path)
                self.entries.insert(place, _entry(path, live))
        self.head, self.genesis, self.lineage = state.head, state.genesis, state.lineage
        return self.entries.copy()  # the caller's to keep: later changes update ours in place


def _entry(path: str, live: LiveFile) -> FileEntry:
    return FileEntry(path=path, version=str(live.version), size=live.size, description=live.description)
