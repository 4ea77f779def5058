"""The local-directory backend: objects as files under a directory, laid out as under a bucket
prefix, each created by a hard link that fails where the key exists."""

from __future__ import annotations

import asyncio
import builtins
import contextlib
import errno
import fcntl
import os
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Literal

from a13n_harness.providers.memory import MemoryStoreError

from .interface import (
    AlreadyExists,
    Create,
    IfHolds,
    ObjectInfo,
    ObjectVersion,
    Overwrite,
    PreconditionFailed,
    TransientError,
)
from .urls import check_directory

# Why a link fails without having been made: anything else (EIO, ETIMEDOUT on a network filesystem) may
# come after it was.
_LINK_REFUSED = {errno.EACCES, errno.EPERM, errno.EROFS, errno.ENOSPC, errno.EDQUOT, errno.ENOENT, errno.ENOTDIR}
_LINK_REFUSED |= {errno.ENAMETOOLONG, errno.EMLINK, errno.EXDEV, errno.ELOOP, errno.EINVAL}
# The folder of init's and doctor's create-only check (`connect.check_create_only`), removed once empty.
_SHORT_LIVED = "doctor/"
STAGING = ".staging"  # a local memory's folder of files written before they are linked into place


class LocalObjectStore:
    """Objects as files under a directory, laid out exactly as under a bucket prefix.

    Every `put` writes and fsyncs a staging file first. `Create` hard-links it into place: the link
    fails if the key exists, so two processes can never both create one key. `IfHolds` and
    `Overwrite` rename it over the key (`IfHolds` under a lock file, with the check). A reader sees
    a whole object or none; an error once the link or rename may have been made is transient.
    """

    ordered_listing = True
    rewrites_in_place: Literal[True] = True

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root)
        check_directory(self.root)
        self._location = self.root.absolute().as_uri()
        self._root_text = os.path.join(self.root, "")  # keys joined as text: pathlib costs more than the stat

    @property
    def location(self) -> str:
        return self._location

    def absent(self, key: str) -> bool:
        # A missing key, which every fresh read's probe meets, is answered by one stat on the loop:
        # the round trip to a worker thread costs far more than the syscall on a local disk.
        try:
            os.lstat(self._root_text + key)
        except FileNotFoundError:
            return True
        except OSError:
            return False  # unreadable, not proven absent: the read in a thread maps the error
        return False

    async def get(self, key: str) -> bytes | None:
        return None if self.absent(key) else await asyncio.to_thread(self._get, key)

    async def put(self, key: str, data: bytes, mode: Create | IfHolds | Overwrite) -> None:
        match mode:
            case Create():
                await asyncio.to_thread(self._create, key, data)
            case IfHolds(expected):
                await asyncio.to_thread(self._rewrite, key, data, expected)
            case Overwrite():
                await asyncio.to_thread(self._overwrite, key, data)
            case _:  # a mode its type leaves out (`IfMatch`): a caller's bug, never a write
                raise TypeError(f"{self.location} does not keep {mode}")

    async def list(self, prefix: str, *, start_after: str | None = None, limit: int | None = None) -> list[ObjectInfo]:
        return (await asyncio.to_thread(self._list, prefix, start_after, limit))[:limit]

    async def delete(self, keys: Sequence[str]) -> None:
        await asyncio.to_thread(self._delete, keys)

    async def now(self, *, ageing: bool = False) -> float:
        return time.time()

    async def list_stored(self, prefix: str) -> builtins.list[ObjectVersion]:
        listed = await self.list(prefix)
        sizes = await asyncio.to_thread(lambda: [(self.root / info.key).stat().st_size for info in listed])
        return [
            ObjectVersion(info.key, "null", info.modified, "", current=True, size=size)
            for info, size in zip(listed, sizes, strict=True)
        ]

    async def delete_stored(self, versions: Sequence[ObjectVersion]) -> None:
        await self.delete([version.key for version in versions])

    async def staged(self, older_than: float) -> builtins.list[tuple[str, bytes]]:
        """Staging files (name, bytes) last written more than `older_than` seconds ago: what a writer
        that died between staging a commit and linking it (or unlinking the stage) left behind."""
        return await asyncio.to_thread(self._list_staged, older_than)

    async def remove_staged(self, name: str) -> None:
        await asyncio.to_thread(self._remove_staged, name)

    def _get(self, key: str) -> bytes | None:
        try:
            return (self.root / key).read_bytes()
        except FileNotFoundError:
            return None
        except OSError as error:
            raise _os_error(error, self.root / key) from error

    def _stage(self, target: Path, data: bytes) -> str:
        """`data` in a synced staging file, with `target`'s folder made: ready to link or rename."""
        target.parent.mkdir(parents=True, exist_ok=True)
        (self.root / STAGING).mkdir(parents=True, exist_ok=True)
        return _write_staged(self.root / STAGING, data)

    def _create(self, key: str, data: bytes) -> None:
        target = self.root / key
        try:
            staged = self._stage(target, data)
            try:
                os.link(staged, target)
            except FileExistsError:
                os.unlink(staged)
                raise AlreadyExists(self.location, key, "the file exists") from None
            except OSError as error:
                os.unlink(staged)
                if error.errno not in _LINK_REFUSED:
                    # A network filesystem (NFS, EFS) can fail a link it made (a timeout, EIO): the
                    # log reads the key back.
                    raise TransientError(f"linking {target} failed, perhaps after it was made: {error}") from error
                raise
        except OSError as error:
            raise _os_error(error, target) from error
        try:
            os.unlink(staged)
            _fsync_directory(target.parent)
        except OSError as error:
            # The object is in place and readable, so the create is not a definitive failure: the
            # log reads the key back (NFS and EFS can fail the directory sync after the link).
            raise TransientError(f"{target} was linked, then: {error.strerror or error}") from error

    def _overwrite(self, key: str, data: bytes) -> None:
        """Replace `key` whole, or create it, by a staged, synced file renamed into place."""
        target = self.root / key
        try:
            staged = self._stage(target, data)
        except OSError as error:
            raise _os_error(error, target) from error
        _rename_into_place(staged, target)

    def _rewrite(self, key: str, data: bytes, expected: bytes) -> None:
        """Replace `key` by a staged, synced file renamed over it, while it holds `expected`: readers
        see the old object or the new one, whole. Rewriters take turns on a lock file, so the check and
        the rename are one step for them (a compaction may still delete the key in between, leaving one
        stray old object that the next compaction deletes again)."""
        target = self.root / key
        staging = self.root / STAGING
        try:
            staging.mkdir(parents=True, exist_ok=True)
            with open(staging / "rewrite.lock", "a") as lock:
                fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
                try:
                    held: bytes | None = target.read_bytes()
                except FileNotFoundError:
                    held = None
                if held != expected:
                    raise PreconditionFailed(self.location, key, "the file holds other bytes, or none")
                staged = _write_staged(staging, data)
                _rename_into_place(staged, target)
        except OSError as error:
            raise _os_error(error, target) from error

    def _list_staged(self, older_than: float) -> builtins.list[tuple[str, bytes]]:
        found: builtins.list[tuple[str, bytes]] = []
        try:
            with os.scandir(self.root / STAGING) as entries:
                for entry in entries:
                    try:
                        if entry.is_file() and entry.stat().st_mtime < time.time() - older_than:
                            found.append((entry.name, Path(entry.path).read_bytes()))
                    except FileNotFoundError:
                        continue  # linked and unlinked meanwhile
        except FileNotFoundError:
            return []
        except OSError as error:
            raise _os_error(error, self.root / STAGING) from error
        return found

    def _remove_staged(self, name: str) -> None:
        try:
            (self.root / STAGING / name).unlink(missing_ok=True)
        except OSError as error:
            raise _os_error(error, self.root / STAGING / name) from error

    def _list(self, prefix: str, start_after: str | None, limit: int | None = None) -> builtins.list[ObjectInfo]:
        # Keys are one level deep ("log/<seq>.json"), so a prefix names a directory plus a name start,
        # or (with no "/") a start of directory names: those folders' keys, in key order.
        directory, _, name_prefix = prefix.rpartition("/")
        if "/" not in prefix:
            return self._list_folders(prefix, start_after, limit)
        folder = self._root_text + directory
        found: builtins.list[ObjectInfo] = []
        try:
            with os.scandir(folder) as entries:
                listed = sorted((entry.name, entry) for entry in entries if entry.name.startswith(name_prefix))
        except FileNotFoundError:
            return []
        except OSError as error:
            raise _os_error(error, Path(folder)) from error
        for name, entry in listed:
            key = f"{directory}/{name}" if directory else name
            if start_after is not None and key <= start_after:
                continue
            try:
                found.append(ObjectInfo(key, entry.stat().st_mtime))
            except FileNotFoundError:
                continue  # deleted by a concurrent compaction
        return found

    def _list_folders(self, name_prefix: str, start_after: str | None, limit: int | None) -> builtins.list[ObjectInfo]:
        try:
            with os.scandir(self._root_text) as entries:
                folders = sorted(
                    f"{entry.name}/" for entry in entries if entry.is_dir() and entry.name.startswith(name_prefix)
                )
        except FileNotFoundError:
            return []
        except OSError as error:
            raise _os_error(error, self.root) from error
        found: builtins.list[ObjectInfo] = []
        for folder in folders:  # "log-x/" sorts before "log/": keys, not names, set the order
            if limit is not None and len(found) >= limit:
                break  # the folders after it are never read
            if folder != f"{STAGING}/" and (start_after is None or f"{folder}\uffff" > start_after):
                found += self._list(folder, start_after)
        return found

    def _delete(self, keys: Sequence[str]) -> None:
        for key in keys:
            try:
                (self.root / key).unlink()
            except FileNotFoundError:
                continue
            except OSError as error:
                raise _os_error(error, self.root / key) from error
        if any(key.startswith(_SHORT_LIVED) for key in keys):
            with contextlib.suppress(OSError):  # not empty: another check's object is there still
                (self.root / _SHORT_LIVED).rmdir()


def _write_staged(staging: Path, data: bytes) -> str:
    """A new file in `staging` holding `data`, synced to disk: its path, to link or rename into place."""
    with tempfile.NamedTemporaryFile(dir=staging, delete=False) as staged:
        staged.write(data)
        staged.flush()
        os.fsync(staged.fileno())
    return staged.name


def _rename_into_place(staged: str, target: Path) -> None:
    """Rename a staged file over `target` and sync the folder. Only a rename refused outright is a
    `MemoryStoreError`: one that failed otherwise (EIO on a network filesystem), or a failed sync
    after it, may have left the new object in place, so that is transient (the put's rule)."""
    try:
        os.replace(staged, target)
    except OSError as error:
        with contextlib.suppress(OSError):
            os.unlink(staged)
        if error.errno in _LINK_REFUSED:
            raise _os_error(error, target) from error
        raise TransientError(f"renaming onto {target} failed, perhaps after it was made: {error}") from error
    try:
        _fsync_directory(target.parent)
    except OSError as error:
        raise TransientError(f"{target} was renamed into place, then: {error.strerror or error}") from error


def _fsync_directory(directory: Path) -> None:
    """Make a new link durable: without this a crash can lose a commit that was reported done."""
    descriptor = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


def _os_error(error: OSError, where: Path) -> MemoryStoreError:
    if error.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        return MemoryStoreError(
            "forbidden", f"No permission to use {where}: {error.strerror}. Check its owner and mode."
        )
    if error.errno in (errno.ENOSPC, errno.EDQUOT):
        return MemoryStoreError("unavailable", f"The disk holding {where} is full; free space and retry.")
    return MemoryStoreError("unavailable", f"Cannot use {where}: {error.strerror or error}.")
