"""Packed checkpoints (format 3): an index of the files, then their texts, so that a cold open
parses the index and decodes a text only when it is read.

A packed checkpoint is one JSON document, laid out exactly so, so that a reader from before it
still parses it and asks to be upgraded:

    {"format":3,"kind":"checkpoint","texts_bytes":N,"texts":"<texts>","index":<index>}

`<texts>` is every live file's text as the content of a JSON string (escaped, without quotes),
back to back in the order of the index's `files`, each taking its `stored` bytes: N in all.
`<index>` is a `CheckpointIndex` in canonical JSON, whose `hash` covers its other members, among
them `blocks`, the SHA-256 of each `BLOCK_BYTES` of `<texts>`. The hash so covers every byte, yet a
cold open hashes only the index and the blocks of the texts it reads (`PackedTexts`).
"""

from __future__ import annotations

import hashlib
import itertools
import operator
import re
from typing import Literal, Self

import pydantic_core
from a13n_harness.providers.memory import MemoryStoreError
from pydantic import PrivateAttr, model_validator

from .canonical_json import canonical
from .changes import SettledIntents
from .checkpoint_content import CheckpointContent
from .codec import Checkpoint
from .directories import counted, directory_counts, located, names_a_file, row_of
from .signed import CorruptObjectError, Signed
from .tombstone import DESTROYED, FORGED
from .wire_values import MAX_OBJECT_BYTES, Hash, Seq, Time, WirePathRows, WirePaths, checkpoint_key

BLOCK_BYTES = 256 * 1024
_OPENING = re.compile(rb'\{"format":3,"kind":"checkpoint","texts_bytes":(0|[1-9][0-9]{0,11}),"texts":"')
_BETWEEN = b'","index":'


class CheckpointIndex(Signed):
    """A packed checkpoint but its texts: its live files in path order, as columns (each file's
    path, bytes of UTF-8, bytes stored, version and description), their directories in order, the
    digest of each block of the texts, and the other members of a `Checkpoint`. A file named in
    `erased` has no text (and takes no bytes)."""

    _hash_covers_bytes = True
    kind: Literal["checkpoint"] = "checkpoint"
    format: Literal[3] = 3
    head_hash: Hash
    floor: Seq
    time: Time
    paths: WirePaths
    # Bounded in `_consistent`, a column at a time: checked item by item, three fifths of validating.
    sizes: tuple[int, ...]
    stored: tuple[int, ...]
    versions: tuple[int, ...]
    descriptions: tuple[str | None, ...]
    described_with: tuple[int, int, int]
    # Each directory of the paths, in order, as the row of the first file below it and the length
    # of its name (`located`): a cold open counts the files below each by bisection, and a name
    # is not stored again, so that the index grows with the paths' slashes, not their depth squared.
    directory_rows: tuple[int, ...]
    directory_lengths: tuple[int, ...]
    deleted: WirePathRows[tuple[str, Seq]]
    blocks: tuple[Hash, ...]
    _written_when_set = frozenset({"genesis", "erased", "folds"})
    _files_below: dict[str, int] = PrivateAttr(default_factory=dict)  # counted as the index is checked
    genesis: Hash | None = None
    erased: WirePathRows[tuple[str, Seq]] | None = None
    folds: SettledIntents | None = None

    @model_validator(mode="after")
    def _consistent(self) -> Self:
        columns = (self.sizes, self.stored, self.versions, self.descriptions)
        if any(len(column) != len(self.paths) for column in columns):
            raise ValueError("one size, stored size, version and description per path")
        if not all(map(operator.lt, self.paths, self.paths[1:])):
            raise ValueError("the paths are not in order, or one is listed twice")
        if any(map(operator.gt, self.sizes, self.stored)) or min(self.sizes, default=0) < 0:
            raise ValueError("a text stored in fewer bytes than its UTF-8, or in fewer than none")
        if min(self.versions, default=0) < 0 or max(self.versions, default=0) > self.seq:
            raise ValueError("a version below zero or after the checkpoint")
        if self.erased is not None:
            erased = dict(self.erased)
            rows = zip(self.paths, self.stored, self.descriptions, strict=True)
            without_text = {path for path, stored, said in rows if path in erased and stored == 0 and said is None}
            if not erased or len(erased) != len(self.erased) or without_text != erased.keys():
                raise ValueError("`erased` names files of the checkpoint without text or description, once each")
        below = counted(self.paths, self.directory_rows, self.directory_lengths)
        if below is None:
            raise ValueError("the directory columns name each directory of the paths, once each, in order")
        self._files_below = below
        tombstones = dict(self.deleted)
        if (
            len(tombstones) != len(self.deleted)
            or not all(map(operator.le, (seq for _, seq in self.deleted), (seq for _, seq in self.deleted[1:])))
            or max(tombstones.values(), default=0) > self.seq
            # A bisection each: asking the tombstones of each path would hash every path.
            or any(row_of(self.paths, path) is not None for path in tombstones)
        ):
            raise ValueError("`deleted` names paths not live, once each, in the order of their deletions")
        if len(self.blocks) != -(-sum(self.stored) // BLOCK_BYTES):
            raise ValueError("one digest per block of the texts")
        return self

    def file_at_a_directory(self) -> str | None:
        """A path both a file's and a directory's, which no writer stores, if the index has one."""
        rows = zip(self.directory_rows, self.directory_lengths, strict=True)
        return next(
            (name for row, length in rows if names_a_file(self.paths, name := self.paths[row][:length], row)), None
        )

    def files_below(self) -> dict[str, int]:
        """How many files lie below each directory, as `State.directories` counts them (a dict of
        its own: a state changes it in place)."""
        return dict(self._files_below)


class PackedTexts:
    """The texts of a packed checkpoint as read, each checked against the digests of the blocks it
    spans when first read. Shared by every file of a state and its copies, and read from any thread:
    at worst two threads check one block both."""

    __slots__ = ("_blocks", "_checked", "_key", "_location", "_texts")

    def __init__(self, location: str, key: str, texts: memoryview, blocks: tuple[str, ...]) -> None:
        self._location, self._key = location, key
        self._texts = texts
        self._blocks = blocks
        self._checked = bytearray(len(blocks))

    def text(self, at: int, stored: int, size: int) -> str:
        """The text whose `stored` bytes start at byte `at`, `size` bytes of UTF-8, or `CorruptObjectError`."""
        stored_form = self.stored_form(at, stored)
        try:
            text = pydantic_core.from_json(b'"' + stored_form + b'"')
            if not isinstance(text, str) or len(text.encode()) != size:
                raise ValueError(text)
        except ValueError:  # a malformed escape or UTF-8, a lone surrogate, a quote: not what a writer stored
            raise self._corrupt(f"the text at byte {at} of its texts is not the one its index describes") from None
        return text

    def stored_form(self, at: int, stored: int) -> memoryview:
        """The `stored` bytes at `at`, once the blocks they span are checked."""
        if not stored:
            return memoryview(b"")
        end = at + stored
        for block in range(at // BLOCK_BYTES, -(-end // BLOCK_BYTES)):
            if not self._checked[block]:
                start = block * BLOCK_BYTES
                if hashlib.sha256(self._texts[start : start + BLOCK_BYTES]).hexdigest() != self._blocks[block]:
                    raise self._corrupt(f"block {block} of its texts does not match its digest")
                self._checked[block] = 1
        return self._texts[at:end]

    def _corrupt(self, reason: str) -> CorruptObjectError:
        return CorruptObjectError(self._location, self._key, reason)


class PackedCheckpoint:
    """A checkpoint of format 3 (see the module's docstring): its index, its texts read when asked
    for, and its bytes as stored."""

    __slots__ = ("data", "index", "texts")

    def __init__(self, index: CheckpointIndex, texts: PackedTexts, data: bytes) -> None:
        self.index, self.texts, self.data = index, texts, data

    @property
    def seq(self) -> int:
        return self.index.seq

    def offsets(self) -> list[int]:
        """The byte of the texts each file's text starts at."""
        return [0, *itertools.accumulate(self.index.stored)][:-1]

    def content(self) -> CheckpointContent:
        """What it holds, every text read."""
        index, erased = self.index, dict(self.index.erased or ())
        files = [
            (path, None if path in erased else self.texts.text(at, stored, size), version)
            for path, at, size, stored, version in zip(
                index.paths, self.offsets(), index.sizes, index.stored, index.versions, strict=True
            )
        ]
        # The other fields are the index's own, by the same names.
        fields = (files if name == "files" else getattr(index, name) for name in CheckpointContent._fields)
        return CheckpointContent._make(fields)

    def encode(self) -> bytes:
        return self.data

    @classmethod
    def made(cls, content: CheckpointContent) -> PackedCheckpoint:
        """A new packed checkpoint holding `content`, proven to decode back to it."""
        assert content.descriptions is not None and content.described_with is not None, "made by this release"
        stored_forms = [b"" if text is None else canonical(text)[1:-1] for _, text, _ in content.files]
        texts = b"".join(stored_forms)
        view = memoryview(texts)
        fields = content._asdict()
        del fields["files"]
        paths = [path for path, _, _ in content.files]
        directory_rows, directory_lengths = located(paths, directory_counts(paths))
        index = CheckpointIndex.signed(
            **fields,
            paths=paths,
            directory_rows=directory_rows,
            directory_lengths=directory_lengths,
            sizes=[0 if text is None else len(text.encode()) for _, text, _ in content.files],
            stored=list(map(len, stored_forms)),
            versions=[version for _, _, version in content.files],
            blocks=[
                hashlib.sha256(view[start : start + BLOCK_BYTES]).hexdigest()
                for start in range(0, len(texts), BLOCK_BYTES)
            ],
        )
        opening = b'{"format":3,"kind":"checkpoint","texts_bytes":%d,"texts":"' % len(texts)
        data = b"".join((opening, texts, _BETWEEN, index.encode(), b"}"))
        key = checkpoint_key(content.seq)
        made = cls.decode("a new checkpoint", key, data) if len(data) <= MAX_OBJECT_BYTES else None
        # As `Signed.signed` does: nothing is written that does not read back as what was meant.
        if made is None or [text for _, text, _ in made.content().files] != [text for _, text, _ in content.files]:
            raise MemoryStoreError("too_large", f"This change would make an object readers refuse ({len(data)} bytes).")
        return made

    @classmethod
    def decode(cls, location: str, key: str, data: bytes, *, served: bool = False) -> PackedCheckpoint:
        """The checkpoint in `data`, read from `key`, or `CorruptObjectError` naming what is wrong.

        `served` (a cold open): its index is taken on its hash over the bytes read, as
        `Checkpoint.decode` takes a checkpoint, and each text is checked when it is read; else
        every block is checked now, and every text proven in the form the store writes."""
        if len(data) > MAX_OBJECT_BYTES:
            raise CorruptObjectError(location, key, f"{len(data)} bytes, more than any object the store writes")
        opening = _OPENING.match(data)
        start = opening.end() if opening else 0
        end = start + int(opening[1]) if opening else 0
        index_start = end + len(_BETWEEN)
        if opening is None or data[end:index_start] != _BETWEEN or not data.endswith(b"}"):
            raise CorruptObjectError(location, key, _unreadable(data) or "not laid out as a packed checkpoint")
        index = CheckpointIndex.decode(location, key, data[index_start:-1], served=served)
        if sum(index.stored) != end - start:
            raise CorruptObjectError(location, key, "its index does not account for its texts")
        packed = cls(index, PackedTexts(location, key, memoryview(data)[start:end], index.blocks), data)
        if not served:
            for path, at, size, stored in zip(index.paths, packed.offsets(), index.sizes, index.stored, strict=True):
                text = packed.texts.text(at, stored, size)
                if canonical(text)[1:-1] != packed.texts.stored_form(at, stored):
                    raise CorruptObjectError(location, key, f"the text of {path} is not in the form the store writes")
        return packed


def decode_checkpoint(location: str, key: str, data: bytes, *, served: bool = False) -> Checkpoint | PackedCheckpoint:
    """The checkpoint stored at `key` in either layout (see `Checkpoint.decode` for `served`)."""
    if data == DESTROYED:  # `destroy` leaves none at a checkpoint's key
        raise CorruptObjectError(location, key, FORGED)
    if _OPENING.match(data):
        return PackedCheckpoint.decode(location, key, data, served=served)
    try:
        return Checkpoint.decode(location, key, data, served=served)
    except CorruptObjectError:
        reason = _unreadable(data)
        if reason is None:
            raise
        raise CorruptObjectError(location, key, reason) from None


def _unreadable(data: bytes) -> str | None:
    """Why a JSON checkpoint of format 3 or later is none this reader takes, in the words an
    operator needs (None: it is not one; `Checkpoint.decode` says why)."""
    try:
        parsed = pydantic_core.from_json(data)
    except ValueError:
        return None
    if not isinstance(parsed, dict) or parsed.get("kind") != "checkpoint":
        return None
    fmt = parsed.get("format")
    if not isinstance(fmt, int) or fmt < 3:
        return None
    return (
        "not laid out as a packed checkpoint"
        if fmt == 3
        else f"format {fmt}; this bucket-memory reads format 3 (upgrade it?)"
    )
