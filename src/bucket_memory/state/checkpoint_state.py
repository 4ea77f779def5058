"""A state as a stored checkpoint of either layout holds it: the cold open's last step."""

from __future__ import annotations

import operator
from collections.abc import Sequence

from a13n_harness.providers.memory import FileFormat

from ..format.codec import Checkpoint
from ..format.directories import directory_counts
from ..format.packed import PackedCheckpoint, decode_checkpoint
from ..format.signed import CorruptObjectError
from ..format.wire_values import checkpoint_key, stored_size_of
from ..runtime.off_loop import off_loop
from .folds import FoldWindow
from .live_file import LiveFile
from .packed_files import PackedFiles
from .state import CheckpointChanges, CheckpointCounts, State, describing, description_of


async def read_checkpoint(location: str, key: str, data: bytes, fmt: FileFormat, *, served: bool = False) -> State:
    """The state a stored checkpoint holds, built in a worker thread when it is large (`served`:
    as `Checkpoint.decode` takes it)."""

    def build() -> State:
        return from_checkpoint(decode_checkpoint(location, key, data, served=served), fmt, location)

    return await off_loop(len(data), build)


def from_checkpoint(checkpoint: Checkpoint | PackedCheckpoint, fmt: FileFormat, location: str) -> State:
    """The state `checkpoint` holds, or `CorruptObjectError` where it breaks a rule its hash cannot."""
    key = checkpoint_key(checkpoint.seq)
    content = checkpoint.index if isinstance(checkpoint, PackedCheckpoint) else checkpoint
    state = State(
        format=fmt,
        head=content.seq,
        head_hash=content.head_hash,
        floor=content.floor,
        genesis=content.genesis,
        since_checkpoint=CheckpointCounts(seq=content.seq),
    )
    try:
        state.folds = FoldWindow.of(content.seq, content.folds or ())
    except ValueError as error:
        raise CorruptObjectError(location, key, str(error)) from None
    paths: Sequence[str]
    versions: Sequence[int]
    deleted: Sequence[tuple[str, int]]
    if isinstance(checkpoint, PackedCheckpoint):
        index = checkpoint.index  # whose columns were checked with it: each path once, no version after it
        paths, versions, deleted = index.paths, index.versions, index.deleted
        state.files = _packed_files(checkpoint, fmt)
        state.directories = index.files_below()
        state.live_bytes, state.stored_bytes = sum(index.sizes), sum(index.stored)
        conflicting = index.file_at_a_directory()
    else:
        paths, versions = [row[0] for row in checkpoint.files], [row[2] for row in checkpoint.files]
        state.files = _whole_files(checkpoint, fmt)
        if len(state.files) != len(paths) or max(versions, default=0) > checkpoint.seq:
            raise CorruptObjectError(location, key, "a file is listed twice or with a future version")
        state.live_bytes = sum(map(operator.attrgetter("size"), state.files.values()))
        state.stored_bytes = sum(map(operator.attrgetter("stored"), state.files.values()))
        deleted = [(path, seq) for path, seq in checkpoint.deleted if path not in state.files]
        state.directories = directory_counts(paths)
        # `check_room` once for the whole: a file conflicts exactly when files lie below its path
        # (asked of each directory, far fewer than the files).
        conflicting = next((name[:-1] for name in state.directories if name[:-1] in state.files), None)
    if conflicting is not None:
        raise CorruptObjectError(location, key, f"{conflicting} is both a file and a directory, which no writer stores")
    state.unsorted = CheckpointChanges(checkpoint.seq, paths, versions, deleted)
    return state


def _described(
    descriptions: Sequence[str | None] | None,
    described_with: tuple[int, int, int] | None,
    count: int,
    fmt: FileFormat,
) -> Sequence[str | None] | None:
    """A checkpoint's descriptions if made under this store's limits, else None: made again."""
    if (
        described_with == describing(fmt)
        and descriptions is not None
        and len(descriptions) == count
        and max(map(len, filter(None, descriptions)), default=0) <= fmt.description_chars
    ):
        return descriptions
    return None


def _whole_files(checkpoint: Checkpoint, fmt: FileFormat) -> dict[str, LiveFile]:
    """The files of a checkpoint of formats 1 and 2, as `State` adds them (a cold open of a large
    memory is mostly this loop)."""
    described = _described(checkpoint.descriptions, checkpoint.described_with, len(checkpoint.files), fmt)
    erasures = dict(checkpoint.erased or ())
    files: dict[str, LiveFile] = {}
    for index, (path, text, version) in enumerate(checkpoint.files):
        if text is None:
            files[path] = LiveFile("", version, 0, 0, None, erasures[path])
        else:
            data = text.encode()
            description = described[index] if described is not None else description_of(text, fmt)
            files[path] = LiveFile(text, version, len(data), stored_size_of(data), description)
    return files


def _packed_files(checkpoint: PackedCheckpoint, fmt: FileFormat) -> PackedFiles:
    """The files of a packed checkpoint, each made when first asked for, its text read when first
    asked for; described again now (reading every text) if described under other limits."""
    index = checkpoint.index
    described = _described(index.descriptions, index.described_with, len(index.paths), fmt)
    files = PackedFiles(checkpoint, (None,) * len(index.paths) if described is None else described)
    if described is None:
        for live in files.values():
            if live.erased is None:
                live.description = description_of(live.text, fmt)
    return files
