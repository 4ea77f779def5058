"""A memory to and from a directory of plain files: what `export` writes and `import` reads.

Export writes one snapshot, the state at one commit, which the store already holds: no request
per file. Import reads every regular file as UTF-8 text under its path in NFC (the memory's
spelling), dot-files included, and refuses two files whose names are one path in NFC; it
skips only version-control folders and links, and names what it skipped so that `--replace`
never deletes a memory file for being skipped.
"""

from __future__ import annotations

import asyncio
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from a13n_harness.providers.memory import FileFormat, MemoryStoreError, validate_path

from .store import LogFileStore

VERSION_CONTROL = frozenset({".git", ".hg", ".svn"})
type Progress = Callable[[int, int], None]


@dataclass(frozen=True, slots=True)
class DirectoryFiles:
    """The files of a directory as memory paths and texts, and the relative paths left out."""

    files: dict[str, str]
    skipped: tuple[str, ...]

    def kept(self, path: str) -> bool:
        """Whether a memory path lies where import skipped something (so `--replace` keeps it)."""
        parts = path.split("/")
        return parts[0] in VERSION_CONTROL or path in self.skipped


def read_directory(directory: Path, fmt: FileFormat, progress: Progress | None = None) -> DirectoryFiles:
    """Every regular file under `directory`, as memory path to text (blocking: run it in a thread)."""
    files: dict[str, str] = {}
    spelled: dict[str, str] = {}
    skipped: list[str] = []
    candidates = sorted(directory.rglob("*"))
    for done, file in enumerate(candidates, start=1):
        if progress is not None:
            progress(done, len(candidates))
        relative = file.relative_to(directory).as_posix()
        if relative.split("/")[0] in VERSION_CONTROL:
            if "/" not in relative:  # the folder, named once
                skipped.append(relative)
            continue
        if file.is_symlink():
            skipped.append(unicodedata.normalize("NFC", relative))
            continue
        if not file.is_file():
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
        try:
            files[path] = file.read_bytes().decode("utf-8")  # as stored: no newline translation
        except UnicodeDecodeError:
            raise MemoryStoreError("invalid_file", f"{file} is not UTF-8 text; nothing was imported.") from None
        spelled[path] = relative
    return DirectoryFiles(files, tuple(skipped))


async def export_snapshot(store: LogFileStore, directory: Path, progress: Progress | None = None) -> tuple[int, int]:
    """Write the memory as it is at its head into an empty or new `directory`: (commit, files written)."""
    state = await store.log.fresh_state()
    texts = {path: live.text for path, live in state.files.items()}  # one commit's files, copied on the loop

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
