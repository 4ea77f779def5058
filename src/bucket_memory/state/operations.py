"""A file memory's mutations as values: write, delete and move, each planned against a state.

A mutation is planned wherever it is committed: by its caller's process (`store.LogFileStore`), or
by another writer that folds it into its own commit from an intent (`intents.Intent`). Either way
the same model runs the same checks against the state at the commit's seq: `dependencies`, then
`expected`, then the path rules and the quota, so a fold decides exactly what its author would have.
Models are strict, since an intent's operation is read from the bucket as hostile input.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Annotated, Literal

from a13n_harness.providers.memory import FileFormat, FileText, MemoryStoreError, describe
from pydantic import Field

from ..format.changes import Change, Delete, Move, Wire, Write
from ..format.wire_values import WirePath, stored_size
from .state import State

# Versions are the seqs of commits, as decimal strings; a caller may name any string, which then
# matches no file (a version check that fails, as for a version read long ago).
MAX_VERSION_CHARS = 64
type Version = Annotated[str, Field(max_length=MAX_VERSION_CHARS)]
# The harness caps a read set at 2048 paths (`read_set_full`); twice that leaves room for others.
MAX_DEPENDENCIES = 4096
type Dependencies = Annotated[tuple[tuple[WirePath, Version | None], ...], Field(max_length=MAX_DEPENDENCIES)]
type Quota = Annotated[int, Field(ge=0, le=2**63)]


class _Operation(Wire):
    """What every mutation checks first: the versions its caller read (`dependencies`, path and
    version or None for absent), against the state it is planned on; and the memory's quota as
    its caller's store sets it (`max_bytes`)."""

    dependencies: Dependencies = ()
    max_bytes: Quota

    def plan(self, state: State) -> Sequence[Change]:
        """The changes that make this mutation on `state`, which it also checks; the harness's
        error (`read_conflict`, `version_mismatch`, ...) when it is refused."""
        raise NotImplementedError

    def _check_dependencies(self, state: State) -> None:
        for path, version in self.dependencies:
            current = file_text(state, path)
            if (current.version if current is not None else None) != version:
                now = f"it is at version {current.version}" if current is not None else "it does not exist now"
                raise MemoryStoreError(
                    "read_conflict",
                    f"{path} changed since it was observed ({now}; the memory's newest commit is {state.head}); "
                    "reread it and reconsider the write.",
                    current=current,
                )

    def _check_quota(self, state: State, growth: int) -> None:
        check_quota(state, growth, self.max_bytes)


class WriteOp(_Operation):
    """Write `text` at `path`, which must be at version `expected` (None: must not exist). A text
    equal to the file's changes nothing, and the file keeps its version."""

    op: Literal["write"] = "write"
    path: WirePath
    text: str
    expected: Version | None

    def plan(self, state: State) -> Sequence[Change]:
        self._check_dependencies(state)
        current = check_expected(state, self.path, self.expected)
        if current is not None and current.text == self.text:
            return ()
        state.check_room(self.path)
        self._check_quota(state, stored_size(self.text) - (state.files[self.path].stored if current else 0))
        return (Write(path=self.path, text=self.text),)

    def unchanged_version(self, state: State) -> str:
        """The version a write that changed nothing leaves its file at."""
        current = file_text(state, self.path)
        assert current is not None, "only a file that exists is written unchanged"
        return current.version


class DeleteOp(_Operation):
    """Delete `path`, which must be at version `expected`."""

    op: Literal["delete"] = "delete"
    path: WirePath
    expected: Version | None

    def plan(self, state: State) -> Sequence[Change]:
        self._check_dependencies(state)
        check_expected(state, self.path, self.expected)
        return (Delete(path=self.path),)


class MoveOp(_Operation):
    """Move `source`, which must be at version `expected`, to `destination`, which must not exist."""

    op: Literal["move"] = "move"
    source: WirePath
    destination: WirePath
    expected: Version | None

    def plan(self, state: State) -> Sequence[Change]:
        self._check_dependencies(state)
        if check_expected(state, self.source, self.expected) is None:
            raise MemoryStoreError("not_found", f"{self.source} does not exist.")
        if (taken := file_text(state, self.destination)) is not None:
            raise MemoryStoreError("already_exists", f"{self.destination} already exists.", current=taken)
        state.check_room(self.destination, leaving=self.source)
        return (Move(source=self.source, destination=self.destination),)


type Operation = Annotated[WriteOp | DeleteOp | MoveOp, Field(discriminator="op")]


def version_of(value: object) -> str | None:
    """A caller's `expected` version as an operation holds it: None, or a string that any other
    value (a number, a string too long to be a version) becomes, which matches no file."""
    if value is None or (isinstance(value, str) and len(value) <= MAX_VERSION_CHARS):
        return value
    return f"!{type(value).__name__}"  # no version begins with "!"


def dependencies_of(dependencies: Mapping[str, object]) -> tuple[tuple[str, str | None], ...]:
    """A caller's dependencies (paths already checked) as an operation holds them."""
    return tuple((path, version_of(version)) for path, version in dependencies.items())


def file_text(state: State, path: str) -> FileText | None:
    """The file at `path` in `state`, None if there is none; `not_found` naming the erasure for one
    whose text was erased (only past states hold such files)."""
    live = state.files.get(path)
    if live is None:
        return None
    if live.erased is not None:
        raise ErasedVersionError(path, str(live.version), live.erased)
    return FileText(path=path, text=live.text, version=str(live.version))


class ErasedVersionError(MemoryStoreError):
    """A version of a file whose text was erased (`not_found`): `erasure` is the erasure commit."""

    def __init__(self, path: str, version: str, erasure: int) -> None:
        super().__init__(
            "not_found",
            f"Version {version} of {path} was erased by commit {erasure}; `bucket-memory log` shows who erased it "
            "and when.",
        )
        self.path, self.version, self.erasure = path, version, erasure


def check_expected(state: State, path: str, expected: str | None) -> FileText | None:
    """The file at `path` if it is at version `expected` (None if absent, as expected), else `version_mismatch`."""
    current = file_text(state, path)
    if (current.version if current is not None else None) != expected:
        raise MemoryStoreError("version_mismatch", _mismatch(path, expected, current, state.head), current=current)
    return current


def check_quota(state: State, growth: int, max_bytes: int) -> None:
    """`memory_full` when `growth` more bytes would take the memory past `max_bytes`."""
    if growth > 0 and state.stored_bytes + growth > max_bytes:
        raise MemoryStoreError(
            "memory_full",
            f"The memory holds {state.stored_bytes} of its {max_bytes} bytes; this write needs {growth} more. "
            "Delete or shorten files first.",
        )


def checked_size(text: str, fmt: FileFormat) -> int:
    """The stored size of a file's text (`wire_values.stored_size`) after the format's checks, or
    the harness's error."""
    if not isinstance(text, str):
        raise MemoryStoreError("invalid_file", f"A memory file is text, not {type(text).__name__}.")
    try:
        text.encode()
    except UnicodeEncodeError:
        raise MemoryStoreError(
            "invalid_file", "A memory file is UTF-8 text; this one has unpaired surrogates."
        ) from None
    describe(text, fmt)
    return stored_size(text)


def _mismatch(path: str, expected: str | None, current: FileText | None, head: int) -> str:
    """Why a compare-and-swap failed, with what the caller needs to decide again: the file's version
    now and the memory's newest commit."""
    newest = f"the memory's newest commit is {head}"
    if current is None:
        return f"{path} does not exist now; it was expected at version {expected} ({newest})."
    if expected is None:
        return f"{path} already exists, at version {current.version} ({newest})."
    return f"{path} is at version {current.version}, not {expected}: it changed since it was read ({newest})."
