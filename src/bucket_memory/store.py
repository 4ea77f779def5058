"""The harness `FileStore` and `SearchableFileStore` over a commit log, and `open_store(url)`."""

from __future__ import annotations

import asyncio
import bisect
import builtins
import os
import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Literal
from urllib.parse import unquote, urlsplit

import regex
from a13n_harness.providers.memory import (
    Changes,
    FileEntry,
    FileFormat,
    FileText,
    FullResync,
    GrepMatch,
    MemoryStoreError,
    Origin,
    describe,
    validate_directory,
    validate_path,
)

from .log import (
    CHECKPOINT_PREFIX,
    LOG_PREFIX,
    Change,
    Commit,
    CommitLog,
    Compaction,
    Delete,
    LiveFile,
    LogOptions,
    Move,
    Problem,
    Purge,
    State,
    Write,
    key_seq,
    parent_directories,
)
from .objects import LocalObjectStore, ObjectStore, check_create_only

DEFAULT_MAX_BYTES = 32 * 1024 * 1024
SEARCH_SECONDS = 2.0


class LogFileStore:
    """One memory kept as a commit log on an object store; the harness file memory contract.

    Versions are the seqs of the commits that last wrote each file, as decimal strings, and the
    change cursor is the head seq. Every mutation validates `dependencies`, then `expected`,
    against the head and commits with one conditional create. Live content is capped at
    `max_bytes` (`memory_full`).
    """

    def __init__(
        self,
        objects: ObjectStore,
        *,
        format: FileFormat | None = None,
        options: LogOptions | None = None,
        max_bytes: int = DEFAULT_MAX_BYTES,
    ) -> None:
        self.format = format or FileFormat()
        self.max_bytes = max_bytes
        self.log = CommitLog(objects, format=self.format, options=options)
        self._listing = _Listing()

    @property
    def location(self) -> str:
        return self.log.objects.location

    async def list(self) -> list[FileEntry]:
        return self._listing.of(await self.log.fresh_state())

    async def read(self, path: str) -> FileText:
        path = validate_path(path, self.format)
        current = _file(await self.log.fresh_state(), path)
        if current is None:
            raise MemoryStoreError("not_found", f"{path} does not exist.")
        return current

    async def write(
        self,
        path: str,
        text: str,
        *,
        expected: str | None,
        origin: Origin,
        dependencies: Mapping[str, str | None] | None = None,
    ) -> str:
        path = validate_path(path, self.format)
        size = _checked_size(text, self.format)
        checked = self._dependencies(dependencies)
        unchanged: list[str] = []

        def plan(state: State) -> Sequence[Change]:
            _check_dependencies(state, checked)
            current = _check_expected(state, path, expected)
            if current is not None and current.text == text:
                unchanged.append(current.version)
                return ()
            _check_room(state, path)
            self._check_quota(state, size - (state.files[path].size if current is not None else 0))
            return (Write(path, text),)

        seq = await self.log.commit(plan, origin)
        return str(seq) if seq is not None else unchanged[-1]

    async def move(
        self,
        source: str,
        destination: str,
        *,
        expected: str,
        origin: Origin,
        dependencies: Mapping[str, str | None] | None = None,
    ) -> str:
        source, destination = validate_path(source, self.format), validate_path(destination, self.format)
        checked = self._dependencies(dependencies)

        def plan(state: State) -> Sequence[Change]:
            _check_dependencies(state, checked)
            _check_expected(state, source, expected)
            if (taken := _file(state, destination)) is not None:
                raise MemoryStoreError("already_exists", f"{destination} already exists.", current=taken)
            _check_room(state, destination, leaving=source)
            return (Move(source, destination),)

        seq = await self.log.commit(plan, origin)
        assert seq is not None, "a move always commits"
        return str(seq)

    async def delete(
        self,
        path: str,
        *,
        expected: str,
        origin: Origin,
        dependencies: Mapping[str, str | None] | None = None,
    ) -> None:
        path = validate_path(path, self.format)
        checked = self._dependencies(dependencies)

        def plan(state: State) -> Sequence[Change]:
            _check_dependencies(state, checked)
            _check_expected(state, path, expected)
            return (Delete(path),)

        await self.log.commit(plan, origin)

    async def changes(self, since: str | None) -> Changes | FullResync:
        state = await self.log.fresh_state()
        cursor = str(state.head)
        if since is None or not since.isdecimal() or not since.isascii():
            return FullResync(cursor=cursor)
        paths = state.changes_since(int(since))
        return FullResync(cursor=cursor) if paths is None else Changes(cursor=cursor, paths=paths)

    async def purge(self) -> None:
        await self.log.commit(lambda state: (Purge(),), Origin(run_id="bucket-memory:purge"))

    async def history(self, path: str | None = None) -> builtins.list[Revision]:
        """Changes in the retained log, newest first; only those touching `path` when given (purges always)."""
        wanted = validate_path(path, self.format) if path is not None else None
        revisions: builtins.list[Revision] = []
        for commit in await self.log.history():
            for change in commit.changes:
                for revision in _revisions(commit, change):
                    if wanted is None or revision.path in (wanted, ""):
                        revisions.append(revision)
        return revisions[::-1]

    async def read_at(self, path: str, version: str) -> FileText:
        """The file as it was once commit `version` had landed (`not_found` if it did not exist then)."""
        path = validate_path(path, self.format)
        old = _file(await self.log.state_at(_seq(version)), path)
        if old is None:
            raise MemoryStoreError("not_found", f"{path} did not exist at version {version}.")
        return old

    async def seq_at(self, moment: datetime) -> int:
        """The last commit made at or before `moment`, from the retained log."""
        commits = await self.log.history()
        before = [commit.seq for commit in commits if commit.moment <= moment]
        if not before:
            floor = f"starts at {commits[0].time}" if commits else "is empty"
            raise MemoryStoreError(
                "not_found", f"The retained history of {self.location} {floor}; nothing before {moment}."
            )
        return before[-1]

    async def restore(self, path: str, version: str, *, origin: Origin) -> str | None:
        """Make `path` what it was at `version` with a new commit; its new version (None: deleted)."""
        path = validate_path(path, self.format)
        target = _file(await self.log.state_at(_seq(version)), path)
        unchanged: list[str] = []

        def plan(state: State) -> Sequence[Change]:
            current = state.files.get(path)
            if target is None:
                return (Delete(path),) if current is not None else ()
            if current is not None and current.text == target.text:
                unchanged.append(str(current.version))
                return ()
            _check_room(state, path)
            self._check_quota(state, len(target.text.encode()) - (current.size if current is not None else 0))
            return (Write(path, target.text),)

        seq = await self.log.commit(plan, origin)
        if target is None:
            return None
        return str(seq) if seq is not None else unchanged[-1]

    async def rollback(self, seq: int, *, origin: Origin) -> int | None:
        """Make the whole memory what it was at commit `seq`, as one new commit (None: nothing differed)."""
        return await self._become(await self.log.state_at(seq), origin)

    async def recover(self, moment: datetime, *, origin: Origin) -> int | None:
        """Make the memory what it was at `moment`, from the bucket's object versions, as one new commit.

        Reaches past a purge, compaction or a deleted prefix (whose objects are re-created first, so
        the log resumes where it was). The new seq, or None when the memory already was that.
        """
        await self.log.undelete()
        return await self._become(await self.log.state_as_of(moment), origin)

    async def _become(self, target: State, origin: Origin) -> int | None:
        """Make the live files exactly those of `target`, as one commit."""
        return await self.put_files(
            {path: live.text for path, live in target.files.items()}, replace=True, origin=origin
        )

    async def put_files(self, files: Mapping[str, str], *, replace: bool, origin: Origin) -> int | None:
        """Write `files` (path to text) as one commit; with `replace`, delete every other file too.

        Only files whose text differs are written; the new seq, or None when nothing differed.
        """
        checked = {validate_path(path, self.format): text for path, text in files.items()}
        sizes = {path: _checked_size(text, self.format) for path, text in checked.items()}

        def plan(state: State) -> Sequence[Change]:
            deletes = [Delete(path) for path in sorted(state.files) if path not in checked] if replace else []
            writes = [
                Write(path, text)
                for path, text in sorted(checked.items())
                if path not in state.files or state.files[path].text != text
            ]
            after = {path: live.size for path, live in state.files.items()}
            for delete in deletes:
                del after[delete.path]
            after.update((write.path, sizes[write.path]) for write in writes)
            _check_tree(after, [write.path for write in writes])
            self._check_quota(state, sum(after.values()) - state.live_bytes)
            return [*deletes, *writes]

        return await self.log.commit(plan, origin)

    async def stats(self) -> Stats:
        """Sizes and the shape of the log, for operators."""
        state = await self.log.fresh_state()
        log = await self.log.objects.list(LOG_PREFIX)
        checkpoints = await self.log.objects.list(CHECKPOINT_PREFIX)
        now = await self.log.objects.now()
        return Stats(
            files=len(state.files),
            bytes=state.live_bytes,
            max_bytes=self.max_bytes,
            head=state.head,
            commits=len(log),
            history_floor=key_seq(log[0].key) if log else None,
            checkpoints=len(checkpoints),
            checkpoint=key_seq(checkpoints[-1].key) if checkpoints else None,
            checkpoint_age=now - checkpoints[-1].modified if checkpoints else None,
        )

    async def compact(self) -> Compaction:
        """Delete objects below the newest checkpoint older than the grace period, outside the retention."""
        return await self.log.compact()

    async def verify(self, progress: Callable[[int, int], None] | None = None) -> builtins.list[Problem]:
        """Every problem with the objects under the prefix; empty when the memory is whole."""
        return await self.log.verify(progress)

    async def search(
        self, pattern: str, *, regex: bool, case_sensitive: bool, path: str, limit: int
    ) -> tuple[builtins.list[GrepMatch], bool]:
        directory = validate_directory(path, self.format)
        compiled = _compile(pattern, regex, case_sensitive)
        state = await self.log.fresh_state()
        # Copied before leaving the event loop: the state changes in place under later commits.
        files = [
            (name, live.text, str(live.version))
            for name, live in sorted(state.files.items())
            if name.startswith(directory)
        ]
        return await asyncio.to_thread(_search, compiled, files, max(limit, 0))

    def _dependencies(self, dependencies: Mapping[str, str | None] | None) -> dict[str, str | None]:
        return {validate_path(path, self.format): version for path, version in (dependencies or {}).items()}

    def _check_quota(self, state: State, growth: int) -> None:
        if growth > 0 and state.live_bytes + growth > self.max_bytes:
            raise MemoryStoreError(
                "memory_full",
                f"The memory holds {state.live_bytes} of its {self.max_bytes} bytes; this write needs {growth} more. "
                "Delete or shorten files first.",
            )


class LocalFileStore(LogFileStore):
    """A memory in a local directory, in the same layout as under a bucket prefix.

    The embedded default, safe across processes on one machine, and a way to open a copy made
    with `aws s3 sync` or `gcloud storage rsync`.
    """

    def __init__(
        self,
        root: str | os.PathLike[str],
        *,
        format: FileFormat | None = None,
        options: LogOptions | None = None,
        max_bytes: int = DEFAULT_MAX_BYTES,
    ) -> None:
        super().__init__(LocalObjectStore(root), format=format, options=options, max_bytes=max_bytes)


class S3FileStore(LogFileStore):
    """A memory under `s3://bucket/prefix` through an aiobotocore S3 client that the caller owns and closes."""

    def __init__(
        self,
        client: Any,
        *,
        bucket: str,
        prefix: str = "",
        format: FileFormat | None = None,
        options: LogOptions | None = None,
        max_bytes: int = DEFAULT_MAX_BYTES,
    ) -> None:
        from .s3 import S3ObjectStore

        objects = S3ObjectStore(client, bucket=bucket, prefix=prefix)
        super().__init__(objects, format=format, options=options, max_bytes=max_bytes)


class GCSFileStore(LogFileStore):
    """A memory under `gs://bucket/prefix` through a google-cloud-storage client that the caller owns."""

    def __init__(
        self,
        client: Any,
        *,
        bucket: str,
        prefix: str = "",
        format: FileFormat | None = None,
        options: LogOptions | None = None,
        max_bytes: int = DEFAULT_MAX_BYTES,
    ) -> None:
        from .gcs import GCSObjectStore

        objects = GCSObjectStore(client, bucket=bucket, prefix=prefix)
        super().__init__(objects, format=format, options=options, max_bytes=max_bytes)


@asynccontextmanager
async def open_store(
    url: str | os.PathLike[str],
    *,
    format: FileFormat | None = None,
    options: LogOptions | None = None,
    max_bytes: int = DEFAULT_MAX_BYTES,
) -> AsyncIterator[LogFileStore]:
    """The memory at `s3://bucket/prefix`, `gs://bucket/prefix`, `file:///abs/path` or a plain path.

    Cloud clients come from the standard credential chains and honour `AWS_ENDPOINT_URL` and
    `STORAGE_EMULATOR_HOST`; they are closed when the context exits.
    """
    settings: dict[str, Any] = {"format": format, "options": options, "max_bytes": max_bytes}
    scheme = urlsplit(os.fspath(url)).scheme
    if scheme == "s3":
        bucket, prefix = bucket_and_prefix(os.fspath(url))
        async with _s3_client() as client:
            store: LogFileStore = S3FileStore(client, bucket=bucket, prefix=prefix, **settings)
            await _checked(store, client.meta.endpoint_url, bucket)
            yield store
    elif scheme == "gs":
        bucket, prefix = bucket_and_prefix(os.fspath(url))
        client = _gcs_client()
        try:
            store = GCSFileStore(client, bucket=bucket, prefix=prefix, **settings)
            await _checked(store, os.environ.get("STORAGE_EMULATOR_HOST", "gcs"), bucket)
            yield store
        finally:
            client.close()
    else:
        yield LocalFileStore(local_path(url), **settings)


_CHECKED_ENDPOINTS: set[tuple[str, str]] = set()


async def _checked(store: LogFileStore, endpoint: str, bucket: str) -> None:
    """Check create-only writes once per endpoint and bucket in this process (a few requests per cold start)."""
    if (endpoint, bucket) not in _CHECKED_ENDPOINTS:
        await check_create_only(store.log.objects)
        _CHECKED_ENDPOINTS.add((endpoint, bucket))


def bucket_and_prefix(url: str) -> tuple[str, str]:
    """The bucket and key prefix of an `s3://` or `gs://` URL."""
    parts = urlsplit(url)
    if not parts.netloc or parts.query or parts.fragment:
        raise MemoryStoreError(
            "invalid_path", f"{url}: a bucket URL is {parts.scheme}://bucket/prefix, with no query or fragment."
        )
    return parts.netloc, unquote(parts.path).strip("/")


@asynccontextmanager
async def _s3_client() -> AsyncIterator[Any]:
    try:
        from aiobotocore.config import AioConfig
        from aiobotocore.session import get_session
    except ImportError:
        raise MemoryStoreError("unavailable", "s3:// needs aiobotocore: pip install 'bucket-memory[s3]'.") from None
    # Timeouts stay far below half the grace period. The log retries (and settles ambiguous creates)
    # itself, so the SDK makes one attempt per request.
    config = AioConfig(connect_timeout=5, read_timeout=20, retries={"total_max_attempts": 1})
    async with get_session().create_client("s3", config=config) as client:
        yield client


def _gcs_client() -> Any:
    try:
        from google.auth.exceptions import DefaultCredentialsError
        from google.cloud import storage
    except ImportError:
        raise MemoryStoreError(
            "unavailable", "gs:// needs google-cloud-storage: pip install 'bucket-memory[gcs]'."
        ) from None
    try:
        return storage.Client()
    except DefaultCredentialsError as error:
        raise MemoryStoreError(
            "forbidden",
            f"No Google Cloud credentials: {str(error).rstrip('.')}. "
            "Run `gcloud auth application-default login` or set GOOGLE_APPLICATION_CREDENTIALS.",
        ) from None


def local_path(url: str | os.PathLike[str]) -> Path:
    """The directory a `file://` URL or plain path names; any other URL is refused with what is accepted."""
    text = os.fspath(url)
    parts = urlsplit(text)
    if parts.scheme == "file":
        if parts.netloc not in ("", "localhost"):
            raise MemoryStoreError("invalid_path", f"{text}: a file URL names a local path, as file:///abs/path.")
        return Path(unquote(parts.path))
    if parts.scheme and len(parts.scheme) > 1:  # one letter is a Windows drive, not a scheme
        raise MemoryStoreError(
            "invalid_path",
            f"{text}: unsupported scheme {parts.scheme!r}; use s3://bucket/prefix, gs://bucket/prefix, "
            "file:///abs/path or a plain path.",
        )
    if not text:
        raise MemoryStoreError("invalid_path", "An empty URL names no memory; give a path or s3:// / gs:// URL.")
    return Path(text)


@dataclass(frozen=True, slots=True)
class Stats:
    """A memory at a glance: live files and bytes, the head, the retained log and the newest checkpoint."""

    files: int
    bytes: int
    max_bytes: int
    head: int
    commits: int
    history_floor: int | None
    checkpoints: int
    checkpoint: int | None
    checkpoint_age: float | None


type RevisionAction = Literal["write", "delete", "moved-in", "moved-out", "purge"]


@dataclass(frozen=True, slots=True)
class Revision:
    """One change to one file in the retained history: the version it made, when, by whom, and what.

    `action` is write, delete, moved-in (from `other`), moved-out (to `other`), or purge (path "").
    """

    path: str
    version: str
    time: str
    origin: Origin
    action: RevisionAction
    other: str | None = None
    size: int | None = None


def _revisions(commit: Commit, change: Change) -> builtins.list[Revision]:
    def made(path: str, action: RevisionAction, other: str | None = None, size: int | None = None) -> Revision:
        return Revision(path, str(commit.seq), commit.time, change.origin or commit.origin, action, other, size)

    match change:
        case Write(path, text):
            return [made(path, "write", size=len(text.encode()))]
        case Delete(path):
            return [made(path, "delete")]
        case Move(source, destination):
            return [made(destination, "moved-in", source), made(source, "moved-out", destination)]
        case Purge():
            return [made("", "purge")]


def _seq(version: str) -> int:
    if not (version.isascii() and version.isdecimal()):
        raise MemoryStoreError(
            "not_found", f"{version!r} is not a version of this store (versions are commit numbers)."
        )
    return int(version)


class _Listing:
    """A state's file entries in path order, brought up to date from the change feed, not rebuilt.

    A listing after a write then costs the changed paths, not a sort of every file.
    """

    def __init__(self) -> None:
        self.state: State | None = None
        self.head = 0
        self.entries: dict[str, FileEntry] = {}
        self.order: builtins.list[str] = []

    def of(self, state: State) -> builtins.list[FileEntry]:
        changed = state.changes_since(self.head) if state is self.state else None
        if changed is None:
            self.entries = {path: _entry(path, live) for path, live in state.files.items()}
            self.order = sorted(self.entries)
        for path in changed or ():
            live = state.files.get(path)
            if live is None and self.entries.pop(path, None) is not None:
                del self.order[bisect.bisect_left(self.order, path)]
            elif live is not None:
                if path not in self.entries:
                    bisect.insort(self.order, path)
                self.entries[path] = _entry(path, live)
        self.state, self.head = state, state.head
        return [self.entries[path] for path in self.order]


def _entry(path: str, live: LiveFile) -> FileEntry:
    return FileEntry(path=path, version=str(live.version), size=live.size, description=live.description)


def _file(state: State, path: str) -> FileText | None:
    live = state.files.get(path)
    return FileText(path=path, text=live.text, version=str(live.version)) if live is not None else None


def _checked_size(text: str, fmt: FileFormat) -> int:
    try:
        size = len(text.encode())
    except UnicodeEncodeError:
        raise MemoryStoreError(
            "invalid_file", "A memory file is UTF-8 text; this one has unpaired surrogates."
        ) from None
    describe(text, fmt)
    return size


def _check_dependencies(state: State, dependencies: Mapping[str, str | None]) -> None:
    for path, version in dependencies.items():
        current = _file(state, path)
        if (current.version if current is not None else None) != version:
            raise MemoryStoreError(
                "read_conflict",
                f"{path} changed since it was observed; reread it and reconsider the write.",
                current=current,
            )


def _check_expected(state: State, path: str, expected: str | None) -> FileText | None:
    current = _file(state, path)
    if (current.version if current is not None else None) != expected:
        raise MemoryStoreError("version_mismatch", f"{path} changed since it was read.", current=current)
    return current


def _check_room(state: State, path: str, *, leaving: str | None = None) -> None:
    """A file cannot share its path with a directory, as on a file system (and in an export)."""
    blocked_by_directory = state.is_directory(path) and not (
        leaving is not None and leaving.startswith(f"{path}/") and state.directories[f"{path}/"] == 1
    )
    parts = path.split("/")
    blocking_file = next(
        (
            prefix
            for prefix in ("/".join(parts[:index]) for index in range(1, len(parts)))
            if prefix in state.files and prefix != leaving
        ),
        None,
    )
    if blocked_by_directory or blocking_file is not None:
        raise MemoryStoreError("invalid_path", f"{path} conflicts with an existing file or directory of the same name.")


def _check_tree(files: Mapping[str, int], written: Sequence[str]) -> None:
    """`_check_room` for a planned set of files rather than a state: no path is both a file and a directory."""
    directories = {directory for path in files for directory in parent_directories(path)}
    for path in written:
        if f"{path}/" in directories or any(directory[:-1] in files for directory in parent_directories(path)):
            raise MemoryStoreError("invalid_path", f"{path} conflicts with a file or directory of the same name.")


def _compile(pattern: str, is_regex: bool, case_sensitive: bool) -> regex.Pattern[str]:
    try:
        return regex.compile(
            pattern if is_regex else regex.escape(pattern), regex.VERSION0 | (0 if case_sensitive else regex.IGNORECASE)
        )
    except regex.error as error:
        raise MemoryStoreError("invalid_pattern", f"The pattern is not a valid regular expression: {error}.") from None


def _search(
    pattern: regex.Pattern[str], files: Sequence[tuple[str, str, str]], limit: int
) -> tuple[list[GrepMatch], bool]:
    """Matching lines in path order, under a hard time budget (patterns come from a model)."""
    deadline = time.monotonic() + SEARCH_SECONDS
    matches: list[GrepMatch] = []
    try:
        for path, text, version in files:
            for number, line in enumerate(text.splitlines(), start=1):
                if pattern.search(line, concurrent=True, timeout=max(deadline - time.monotonic(), 0.001)):
                    if len(matches) == limit:
                        return matches, True
                    matches.append(GrepMatch(path=path, line=number, text=line, version=version))
    except TimeoutError:
        raise MemoryStoreError(
            "invalid_pattern",
            f"The pattern took over {SEARCH_SECONDS:g} s to match; simplify it (avoid nested repetition like (a|aa)+).",
        ) from None
    return matches, False
