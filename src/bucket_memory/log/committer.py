"""One attempt at one commit: a batch planned on the head, settled, and the head moved by what
settling proved. The caller owns any loop: the group-commit queue (`commit_log.py`) plans again
after a lost race, a fleet (`fleet/`) goes on through intents.

The invariants cited by number are those of `log`'s module docstring.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass

from a13n_harness.providers.memory import MemoryStoreError, Origin

from ..format.changes import Change, Erase, Fold, text_bytes
from ..format.codec import Commit
from ..format.wire_values import reloads
from ..runtime import telemetry
from ..runtime.off_loop import off_loop
from ..state.state import State
from . import settle
from .batch import Lost, Request, folds_of, plan_batch, resolve
from .head import Head
from .options import LogOptions

# Keys a refused create reads when no plan follows (the batch goes on elsewhere): the winner, and
# one after it (a 404 there proves the head for free).
WINNER_READS = 2


def unconfirmed(location: str, seq: int) -> MemoryStoreError:
    return MemoryStoreError(
        "write_unconfirmed",
        f"{location} did not confirm a commit near seq {seq}; the write may or may not have happened. "
        "Read the file before trying again.",
    )


@dataclass(frozen=True, slots=True)
class Committed:
    """The batch's commit landed at its seq; every request of the batch has its answer."""

    commit: Commit


@dataclass(frozen=True, slots=True)
class Stale:
    """Nothing was created, and the head has moved since the plan: a plan that changed nothing ran
    on a head not proven during the calls (it is proven now), or compaction passed the head (it is
    reloaded now). No request has its answer: plan again."""


@dataclass(frozen=True, slots=True)
class Nothing:
    """No plan changed anything, on a head proven during the calls: every request has its answer
    (its refusal, or the version it left unchanged)."""


type Attempt = Committed | Lost | Stale | Nothing


class Committer:
    """Makes a batch of requests into one commit at the head, once, and answers what became of it.

    `attempt` plans every request on the head and settles one create (`settle.Settler`); each
    outcome moves the head one way: landed, the planned state becomes the head (`Committed`);
    lost, the winner's commits are applied (`Lost`); passed by compaction, the memory is reloaded
    (`Stale`); fenced or unknown, `unavailable` or `write_unconfirmed` is raised. Callers
    serialize their use (the log's lock) and own every retry.
    """

    def __init__(self, head: Head, options: LogOptions) -> None:
        self.head = head
        self.options = options
        self.settler = settle.Settler(head, options.request_attempts)

    @property
    def location(self) -> str:
        return self.head.reader.location

    async def attempt(self, batch: Sequence[Request], *, since: float, replanning: bool = True) -> Attempt:
        """Plan the batch's requests in order and commit their changes as one commit (invariants 1,
        5); `since`, a moment by which every request was waiting. A request whose intent this
        commit may not settle (settled meanwhile, or past its window) is left out, unanswered.
        After a lost race the head is made current when `replanning`; else only the winner and one
        key after it are read (the head is left as a stale one is)."""
        head = self.head
        state = await head.loaded()  # invariant 2: plan on a head recent enough to trust
        seq = state.head + 1
        batch = _foldable(batch, state, seq)
        scratch, planned = plan_batch(state, batch, seq, edits=self.options.store_edits)
        accepted = [
            (request, changes)
            for request, changes in zip(batch, planned, strict=True)
            if changes and isinstance(changes, Sequence)
        ]
        folds = folds_of(batch, planned)
        # `recover`'s mark to load again is committed though it changes nothing (a fold may leave
        # the batch empty: nothing of it is read before that is known).
        mark = next((request.origin for request in batch if reloads(request.origin)), None)
        if not accepted and not folds and mark is None:
            if head.confirmed_at < since:  # invariant 5: refuse only on a head proven during the calls
                await head.probe()
                return Stale()
            resolve(batch, planned, None)
            return Nothing()
        commit = await self._made(state, accepted, folds, mark or batch[0].origin)
        reads = settle.LOSER_READS if replanning else WINNER_READS
        match await self.settler.settle(commit, loser_reads=reads):
            case settle.Landed(after, proven_at):
                scratch.advance(commit)
                head.advance(scratch, commit)
                telemetry.count("commits")
                resolve(batch, planned, seq)  # before anything else can fail: the callers' writes landed
                await self._take(after, proven_at)
                return Committed(commit)
            case settle.Lost(run, proven_at):
                telemetry.count("conflicts")
                head.traffic.lost_at = self.options.clock()
                await self._take(run, proven_at, catch_up=replanning)
                return Lost()
            case settle.Passed():
                await head.cold_start()
                return Stale()
            case settle.Fenced(run, proven_at):
                await self._take(run, proven_at)
                raise MemoryStoreError(
                    "unavailable", f"{self.location} kept failing; nothing was written. Try again later."
                )
            case settle.Unknown(reload):
                if reload:
                    head.forget()
                raise unconfirmed(self.location, seq)

    async def _made(
        self,
        state: State,
        accepted: list[tuple[Request, Sequence[Change]]],
        folds: tuple[Fold, ...],
        fallback: Origin,
    ) -> Commit:
        """The commit of the accepted requests' changes (and the intents it settles) after `state`,
        under the first caller's origin, each other caller's change under its own; what its requests
        must store before it is created (`Request.before_create`) is stored."""
        # `recover`'s mark to load again goes on the commit whatever else the batch holds.
        first = fallback if reloads(fallback) or not accepted else accepted[0][0].origin
        changes = tuple(
            change if request.origin == first else change.model_copy(update={"origin": request.origin})
            for request, request_changes in accepted
            for change in request_changes
        )
        # The server's clock, as the object store last saw it, and never before the head (seq_at
        # and recovery look commits up by time, so times must rise with seqs).
        at = max(await self.head.reader.objects.now(), state.head_time)
        make = functools.partial(
            Commit.create,
            state.head + 1,
            state.head_hash,
            changes,
            first,
            at=at,
            sealed=self.options.erasable,
            folded=folds,
        )
        if any(isinstance(change, Erase) for change in changes) and not any(r.before_create for r, _ in accepted):
            # Only `erase` records an erasure; readers would find any other commit of one void.
            raise MemoryStoreError("forbidden", "Only `bucket-memory erase` commits an erasure.")
        commit = await off_loop(text_bytes(changes), make)
        for request, _ in accepted:
            if request.before_create is not None:  # what must be stored before the commit is (an erasure's record)
                await request.before_create(commit)
        return commit

    async def _take(self, run: Sequence[Commit], proven_at: float | None, *, catch_up: bool = True) -> None:
        """Apply commits read past the head; prove the head as of `proven_at`, or catch up to it
        (unless not `catch_up`: the head is then left behind, unproven, as a stale one is)."""
        for commit in run:
            self.head.apply(commit)
        if proven_at is not None:
            self.head.prove(proven_at)
        elif catch_up:
            await self.head.catch_up()


def _foldable(batch: Sequence[Request], state: State, seq: int) -> list[Request]:
    """The batch without the requests whose intents commit `seq` may not settle (invariant 9)."""
    staying, ids = [], set()
    for request in batch:
        intent = request.intent
        if intent is not None and (intent.id in ids or not state.folds.foldable(intent.id, intent.base, seq)):
            continue
        if intent is not None:
            ids.add(intent.id)
        staying.append(request)
    return staying
