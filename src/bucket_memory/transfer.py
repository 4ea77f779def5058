"""A memory to and from a directory of plain files: what `export` writes and `import` reads.

Export writes one snapshot, the state at one commit, which the store already holds: no request
per file. Import reads every regular file as UTF-8 text under its path in NFC (the memory's
spelling), dot-files included, and refuses two files whose names are one path in NFC, or a file
larger than a memory file may be (from its size, before reading it). It skips version-control
folders, links and anything that is not a regular file (a FIFO, a socket, a device), and names
each with why, so that `--replace` never deletes a memory file for being skipped.
"""

from __future__ import annotations

import asyncio
import os
import stat
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from a13n_harness.providers.memory import FileFormat, MemoryStoreError, validate_path

from .files.store import LogFileStore
from .state.state import texts_of

VERSION_CONTROL = frozenset({".git", ".hg", ".svn"})
type Progress = Callable[[int, int], None]


@dataclass(frozen=True, slots=True)
class Skipped:
    """A relative path import left out, and why."""

    path: str
    reason: str


@dataclass(frozen=True, slots=True)
class DirectoryFiles:
    """The files of a directory as memory paths and texts, and the relative paths left out."""

    files: dict[str, str]
    skipped: tuple[Skipped, ...]

    def kept(self, path: str) -> bool:
        """Whether a memory path lies where import skipped something (so `--replace` keeps it)."""
        return path.split("/")[0] in VERSION_CONTROL or path in {skipped.path for skipped in self.skipped}


def read_directory(directory: Path, fmt: FileFormat, progress: Progress | None = None) -> DirectoryFiles:
    """Every regular file under `directory`, as memory path to text (blocking: run it in a thread)."""
    files: dict[str, str] = {}
    spelled: dict[str, str] = {}
    skipped: list[Skipped] = []
    candidates = sorted(directory.rglob("*"))
    for done, file in enumerate(candidates, start=1):
        if progress is not None:
            progress(done, len(candidates))
        relative = file.relative_to(directory).as_posix()
        if relative.split("/")[0] in VERSION_CONTROL:
            if "/" not in relative:  # the folder, named once
                skipped.append(Skipped(relative, "a version-control folder"))
            continue
        try:
            mode = file.lstat().st_mode
        except FileNotFoundError:
            continue  # removed since the directory was listed
        kind = _kind(mode)
        if kind == "directory":
            continue
        if kind != "file":
            skipped.append(Skipped(unicodedata.normalize("NFC", relative), f"a {kind}, not a regular file"))
            continue
        try:
            path = validate_path(relative, fmt)
        except MemoryStoreError as error:
            raise MemoryStoreError(error.code, f"{file}: {error}; nothing was imported.") from None
        if path in spelled:
            raise MemoryStoreError(
                "invalid_path",
                f"{directory / spelled[path]} and {file} are one memory path, {path}, once their names are in "
                "Unicode NFC; rename one. Nothing was imported.",
            )
        files[path] = _text(file, fmt.max_file_bytes)
        spelled[path] = relative
    return DirectoryFiles(files, tuple(skipped))


def _kind(mode: int) -> str:
    """What a directory entry is, from its `lstat` mode (links are not followed)."""
    if stat.S_ISLNK(mode):
        return "link"
    if stat.S_ISDIR(mode):
        return "directory"
    if stat.S_ISREG(mode):
        return "file"
    if stat.S_ISFIFO(mode):
        return "FIFO"
    if stat.S_ISSOCK(mode):
        return "socket"
    return "device"


def _text(file: Path, limit: int) -> str:
    """A file's UTF-8 text as stored (no newline translation), refused by its size before it is read."""
    with file.open("rb") as opened:
        size = os.fstat(opened.fileno()).st_size
        data = b"" if size > limit else opened.read(limit + 1)  # a file still growing stops at the limit
    if max(size, len(data)) > limit:
        raise MemoryStoreError(
            "too_large",
            f"{file} has {max(size, len(data))} bytes; a memory file has at most {limit}. Nothing was imported.",
        )
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise MemoryStoreError("invalid_file", f"{file} is not UTF-8 text; nothing was imported.") from None


async def export_snapshot(store: LogFileStore, directory: Path, progress: Progress | None = None) -> tuple[int, int]:
    """Write the memory as it is at its head into an empty or new `directory`: (commit, files written)."""
    state = await store.state()
    texts = await texts_of(state.files.items(), state.live_bytes)  # one commit's files

    def write() -> None:
        root = directory.resolve()
        for done, (path, text) in enumerate(sorted(texts.items()), start=1):
            target = directory.joinpath(*path.split("/"))
            if not target.resolve().is_relative_to(root):
                raise MemoryStoreError("invalid_path", f"{path} would land outside {directory}.")
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text, encoding="utf-8", newline="")
            if progress is not None:
                progress(done, len(texts))

    await asyncio.to_thread(write)
    return state.head, len(texts)
