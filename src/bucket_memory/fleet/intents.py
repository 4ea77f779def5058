"""Intents: a write one process publishes for whoever commits next to fold into its commit.

An intent lives at `pending/<made>-<base>-<id>.json`, a key only its author uses, created once and
never changed. It holds one `operations` mutation, its caller's origin, and `base`, the head the
author saw: a commit may settle it only within `folds.FOLD_WINDOW` commits after `base`, and only
once (`folds.FoldWindow`). Intents are read from the bucket as hostile input, like every object:
a canonical, hashed document of bounded size, whose key names what it holds, and whose mutation
is checked again by the folder against its own limits before it is planned.
"""

from __future__ import annotations

import secrets
from typing import Annotated, Literal

from a13n_harness.providers.memory import FileFormat, Origin
from pydantic import Field

from ..format.changes import IntentId
from ..format.signed import CorruptObjectError, Signed
from ..format.wire_values import Hash, WireOrigin, checked_path, intent_key
from ..state.operations import DeleteOp, MoveOp, Operation, WriteOp, checked_size

# An intent holds one file's text (64 KiB by default) and its read set: anything past this is not
# one a writer made, and is refused before it is parsed.
MAX_INTENT_BYTES = 4 * 1024 * 1024
_MAX_MADE = 10**13 - 1


class Intent(Signed):
    """One process's write, published for another to commit: `operation` as its caller asked it,
    `origin` naming the caller, `seq` the head its author saw (its base), `genesis` the memory (the
    hash of its commit 1: an intent copied from another memory is never folded), `made` when (its
    author's clock, in milliseconds: only the order intents are folded in depends on it)."""

    _written_when_set = frozenset({"genesis"})
    _shared = True
    kind: Literal["intent"] = "intent"
    format: Literal[1] = 1
    id: IntentId
    made: Annotated[int, Field(ge=0, le=_MAX_MADE)]
    origin: WireOrigin
    operation: Operation
    genesis: Hash | None = None

    @classmethod
    def create(cls, operation: Operation, origin: Origin, *, base: int, genesis: str | None, made: float) -> Intent:
        """A new intent of `operation` on head `base` of the memory whose commit 1 hashes to
        `genesis` (None before there is one), made at `made` (seconds since the epoch)."""
        return cls.signed(
            seq=base,
            id=secrets.token_hex(16),
            made=min(max(int(made * 1000), 0), _MAX_MADE),
            origin=origin,
            operation=operation,
            genesis=genesis,
        )

    @property
    def base(self) -> int:
        return self.seq

    @property
    def key(self) -> str:
        return intent_key(self.made, self.seq, self.id)

    def stored_at(self, key: str) -> bool:
        return key == self.key

    def belongs_to(self, genesis: str | None) -> bool:
        """Whether it may have been made for the memory whose commit 1 hashes to `genesis` (None: a
        folder that does not know it). An intent that names no memory was made on an empty one
        (base 0) or on one whose reader did not know its genesis (a first-release checkpoint): a
        folder that knows its memory's takes only the first, which its window ends by commit 32."""
        if genesis is None:
            return True
        return self.genesis == genesis if self.genesis is not None else self.base == 0

    def foreign(self, genesis: str | None) -> bool:
        """Whether it names another memory than the one whose commit 1 hashes to `genesis`: never
        foldable here, whoever reads it (an intent that names none may be of a reader that did not know)."""
        return genesis is not None and self.genesis is not None and self.genesis != genesis

    def checked(self, fmt: FileFormat, max_bytes: int) -> Operation:
        """Its mutation as a store of `fmt` capped at `max_bytes` would plan it: the harness's error
        (`invalid_path`, `invalid_file`, `too_large`), which settles it as refused, when its paths
        or text are not ones such a store writes; its quota no more than `max_bytes` (an author
        names its own, which never lifts the folder's)."""
        operation = self.operation
        if operation.max_bytes > max_bytes:
            operation = operation.model_copy(update={"max_bytes": max_bytes})
        paths = [path for path, _ in operation.dependencies]
        match operation:
            case WriteOp():
                paths.append(operation.path)
                checked_size(operation.text, fmt)
            case MoveOp():
                paths += [operation.source, operation.destination]
            case DeleteOp():
                paths.append(operation.path)
        for path in paths:
            checked_path(path, fmt)
        return operation


def read_intent(location: str, key: str, data: bytes) -> Intent:
    """The intent stored at `key`, or `CorruptObjectError` naming what is wrong with it."""
    if len(data) > MAX_INTENT_BYTES:
        raise CorruptObjectError(location, key, f"{len(data)} bytes, more than any intent a writer makes")
    return Intent.decode(location, key, data)
