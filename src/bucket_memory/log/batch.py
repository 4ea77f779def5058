"""A group commit's batch: the requests waiting in it, planned in order, and their outcomes.

A request is a caller's mutation in this process, or an intent another process published
(`intents.Intent`) that this commit folds in; a request of either kind that carries an intent
is settled in the commit by a `Fold` record, whatever its plan decided.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from a13n_harness.providers.memory import MemoryStoreError, Origin

from ..format.changes import Change, Fold, Write
from ..format.codec import Commit
from ..format.delta import stored_form
from ..runtime.telemetry import Tally
from ..state.operations import Operation, WriteOp
from ..state.state import State
from .intents import Intent

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


class HandedOver(Exception):
    """Not committed here: the request lost a race and goes on as an intent (`fleet.py`)."""


@dataclass(slots=True)
class Request:
    """A mutation waiting to be committed, alone or with others, by `deadline` (time.monotonic);
    `tally` counts what the commit cost for the caller's operation. `operation` is set for a
    mutation that can be published as an intent; `intent`, when this commit settles one;
    `before_create`, when something must be stored before a commit carrying its changes is."""

    plan: Plan
    origin: Origin
    outcome: asyncio.Future[Result]
    deadline: float
    tally: Tally | None = None
    operation: Operation | None = None
    intent: Intent | None = None
    before_create: BeforeCreate | None = None

    @property
    def may_hand_over(self) -> bool:
        """Whether it can go on as an intent after a lost race: a mutation of ours not yet published."""
        return self.operation is not None and self.intent is None


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


def consume(outcome: asyncio.Future[Result]) -> None:
    if not outcome.cancelled():
        outcome.exception()
