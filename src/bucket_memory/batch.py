"""A group commit's batch: the requests waiting in it, planned in order, and their outcomes."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from a13n_harness.providers.memory import MemoryStoreError, Origin

from .codec import Change, Write
from .delta import stored_form
from .state import State
from .telemetry import Tally

type Plan = Callable[[State], Sequence[Change]]
type Planned = Sequence[Change] | MemoryStoreError  # a request's changes, or why it was refused


@dataclass(slots=True)
class Request:
    """A caller's mutation waiting to be committed, alone or with others, by `deadline` (time.monotonic);
    `tally` counts what the commit cost for the caller's operation."""

    plan: Plan
    origin: Origin
    outcome: asyncio.Future[int | None]
    deadline: float
    tally: Tally | None = None


def plan_batch(state: State, batch: Sequence[Request], seq: int, *, edits: bool) -> tuple[State, list[Planned]]:
    """Run the batch's plans in order on `state` layered (left as it is): the state after every
    accepted change, for `State.absorb` once the commit lands, and each request's changes or its
    error. With `edits`, a write of an existing file is planned as an edit where that is smaller.

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
        planned.append(tuple(changes))
    return scratch, planned


def _applied(state: State, planned: Sequence[Planned], seq: int) -> State:
    """`state` layered with the changes of every accepted request applied."""
    scratch = state.layered()
    for changes in planned:
        if not isinstance(changes, MemoryStoreError):
            for change in changes:
                scratch.apply_change(change, seq)
    return scratch


def resolve(batch: Sequence[Request], planned: Sequence[Planned], seq: int | None) -> None:
    for request, outcome in zip(batch, planned, strict=True):
        if request.outcome.done():
            continue
        if isinstance(outcome, MemoryStoreError):
            request.outcome.set_exception(outcome)
        else:
            request.outcome.set_result(seq if outcome else None)


def fail(batch: Sequence[Request], error: BaseException) -> None:
    for request in batch:
        if not request.outcome.done():
            request.outcome.set_exception(error)


def consume(outcome: asyncio.Future[int | None]) -> None:
    if not outcome.cancelled():
        outcome.exception()
