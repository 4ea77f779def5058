"""A group commit's batch: the requests waiting in it, planned in order, and their outcomes.

A request is a caller's mutation in this process, or a write published for any process to commit
(an intent, `fleet/`) that this commit folds in; a request that carries one is settled in the
commit by a `Fold` record, whatever its plan decided.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from a13n_harness.providers.memory import MemoryStoreError, Origin

from ..format.changes import Change, Fold, Write
from ..format.codec import Commit
from ..format.delta import stored_form
from ..runtime.telemetry import Tally
from ..state.operations import Operation, WriteOp
from ..state.state import State

type Plan = Callable[[State], Sequence[Change]]
# Awaited with a commit that carries a request's changes, before it is created (`Request.before_create`).
type BeforeCreate = Callable[[Commit], Awaitable[None]]
# What a commit did for a request: its seq, the version of a file a write left unchanged, or None
# when the plan (a caller's own function) changed nothing.
type Result = int | str | None


@dataclass(frozen=True, slots=True)
class Unchanged:
    """A write whose text the file already held: it stays at `version`."""

    version: str


type Planned = Sequence[Change] | Unchanged | MemoryStoreError  # a request's changes, or why not


@dataclass(frozen=True, slots=True)
class Lost:
    """Another writer's commit took the seq the batch was planned for: its commits are applied to
    the head. The answer to a request that is not planned again after a lost race."""


# What a request's outcome holds: what the commit did for it, or that it lost its race.
type Answer = Result | Lost


class Published(Protocol):
    """A write published for whichever process commits next to settle (an intent, `fleet/`): its
    id, the hash of the document that holds it, and its base (the head its author saw)."""

    @property
    def id(self) -> str: ...

    @property
    def hash(self) -> str: ...

    @property
    def base(self) -> int: ...


@dataclass(slots=True)
class Request:
    """A mutation waiting to be committed, alone or with others, by `deadline` (time.monotonic);
    `tally` counts what the commit cost for the caller's operation. `operation` is set for a
    file mutation (a write that changes nothing is answered its file's version); `intent`, when
    the commit settles a published write; `before_create`, when something must be stored before
    a commit carrying its changes is. Unless it `retries`, a lost race answers it `Lost`."""

    plan: Plan
    origin: Origin
    outcome: asyncio.Future[Answer]
    deadline: float
    tally: Tally | None = None
    operation: Operation | None = None
    intent: Published | None = None
    before_create: BeforeCreate | None = None
    retries: bool = True


def plan_batch(state: State, batch: Sequence[Request], seq: int, *, edits: bool) -> tuple[State, list[Planned]]:
    """Run the batch's plans in order on `state` layered (left as it is): the state after every
    accepted change, for `State.absorb` once the commit lands, and each request's changes, its
    file's version when it changed nothing, or its error. With `edits`, a write of an existing
    file is planned as an edit where that is smaller.

    Every change is applied as it is planned, so a change that breaks a rule is its caller's
    error, and the commit holds only changes every reader can apply.
    """
    scratch = state.layered()
    planned: list[Planned] = []
    for request in batch:
        try:
            changes: list[Change] = []
            for change in request.plan(scratch):
                old = scratch.files.get(change.path) if edits and isinstance(change, Write) else None
                changes.append(stored_form(change, old.text if old is not None and old.erased is None else None))
                scratch.apply_change(changes[-1], seq)
        except MemoryStoreError as error:
            planned.append(error)
            scratch = _applied(state, planned, seq)  # without what the refused request half applied
            continue
        if not changes and isinstance(request.operation, WriteOp):
            planned.append(Unchanged(request.operation.unchanged_version(scratch)))
        else:
            planned.append(tuple(changes))
    return scratch, planned


def folds_of(batch: Sequence[Request], planned: Sequence[Planned]) -> tuple[Fold, ...]:
    """How the commit settles each intent of the batch."""
    folds = []
    for request, outcome in zip(batch, planned, strict=True):
        if (intent := request.intent) is None:
            continue
        match outcome:
            case MemoryStoreError(code=code):
                folds.append(Fold(id=intent.id, intent=intent.hash, base=intent.base, outcome="refused", code=code))
            case Unchanged(version):
                folds.append(
                    Fold(id=intent.id, intent=intent.hash, base=intent.base, outcome="unchanged", version=int(version))
                )
            case _:
                folds.append(Fold(id=intent.id, intent=intent.hash, base=intent.base, outcome="applied"))
    return tuple(folds)


def _applied(state: State, planned: Sequence[Planned], seq: int) -> State:
    """`state` layered with the changes of every accepted request applied."""
    scratch = state.layered()
    for changes in planned:
        if not isinstance(changes, MemoryStoreError | Unchanged):
            for change in changes:
                scratch.apply_change(change, seq)
    return scratch


def resolve(batch: Sequence[Request], planned: Sequence[Planned], seq: int | None) -> None:
    for request, outcome in zip(batch, planned, strict=True):
        if request.outcome.done():
            continue
        match outcome:
            case MemoryStoreError():
                request.outcome.set_exception(outcome)
            case Unchanged(version):
                request.outcome.set_result(version)
            case _:
                request.outcome.set_result(seq if outcome else None)


def fail(batch: Sequence[Request], error: BaseException) -> None:
    for request in batch:
        if not request.outcome.done():
            request.outcome.set_exception(error)


def consume(outcome: asyncio.Future[Answer]) -> None:
    if not outcome.cancelled():
        outcome.exception()
