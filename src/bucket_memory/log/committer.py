"""One group commit's batch made into one commit: planned on the head, settled, and the head moved on.

The invariants cited by number are those of `log`'s module docstring.
"""

from __future__ import annotations

import asyncio
import functools
import random
from collections.abc import Sequence

from a13n_harness.providers.memory import MemoryStoreError, Origin

from ..format.changes import Change, Erase, Fold, text_bytes
from ..format.codec import Commit
from ..runtime import deadline, telemetry
from ..runtime.off_loop import off_loop
from ..state.state import State
from .batch import HandedOver, Request, folds_of, plan_batch, resolve
from .head import Head
from .options import LogOptions
from .settle import LOSER_READS, Fenced, Landed, Lost, Passed, Settler, Unknown

# Keys a refused create reads when its batch goes on as intents: the winner, and one after it (a
# 404 there proves the head for free).
HANDING_OVER_READS = 2


def unconfirmed(location: str, seq: int) -> MemoryStoreError:
    return MemoryStoreError(
        "write_unconfirmed",
        f"{location} did not confirm a commit near seq {seq}; the write may or may not have happened. "
        "Read the file before trying again.",
    )


class Outraced(Exception):
    """A fold's one attempt lost to another writer's commit, which the head now holds: its author
    looks there for what became of its intent (`fleet.py`)."""


class Committer:
    """Makes a batch of requests into one commit at the head, moving the head by what settling proved.

    Each outcome of `Settler` moves the head one way: landed, the planned state becomes the head;
    lost, the winner's commits are applied and the batch is planned again; passed by compaction,
    the memory is reloaded; fenced or unknown, the callers get `unavailable` or `write_unconfirmed`.
    Callers serialize their use (the log's lock).
    """

    def __init__(self, head: Head, options: LogOptions) -> None:
        self.head = head
        self.options = options
        self.settler = Settler(head, options.request_attempts)

    @property
    def location(self) -> str:
        return self.head.reader.location

    async def commit(self, batch: Sequence[Request], *, once: bool = False) -> Commit | None:
        """Plan every request of the batch and commit their changes as one commit (invariants 1, 5);
        the commit, or None when no plan changed anything and no intent needed settling.

        A request that carries an intent no longer foldable at the head (settled meanwhile, or
        past its window) leaves the batch unplanned, answered `HandedOver`. After a lost race,
        with `once` the winner's commits are taken and `Outraced` raised; else a mutation that can
        go on as an intent does (answered `HandedOver`) and the rest are planned again."""
        head, clock = self.head, self.options.clock
        taken = clock()  # every request of the batch was waiting by now
        probe_after = self.options.probe_before_write_after
        if probe_after is not None and clock() - head.confirmed_at > probe_after:
            await head.loaded()
            await head.probe()  # a head this old is likely stale: one GET, not a failed PUT and a catch-up
        losses = 0
        while True:
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
            if not accepted and not folds:
                if head.confirmed_at < taken:  # invariant 5: refuse only on a head proven during the calls
                    await head.probe()
                    continue
                resolve(batch, planned, None)
                return None
            commit = await self._made(state, accepted, folds, batch[0].origin)
            # A batch that goes on as intents if it loses needs only the winner (whether it took
            # our place) and no catch-up: publishing an intent lists the log itself.
            handing = not once and self.options.fleet_commit and all(request.may_hand_over for request in batch)
            match await self.settler.settle(commit, loser_reads=HANDING_OVER_READS if handing else LOSER_READS):
                case Landed(after, proven_at):
                    scratch.advance(commit)
                    head.advance(scratch, commit)
                    telemetry.count("commits")
                    resolve(batch, planned, seq)  # before anything else can fail: the callers' writes landed
                    await self._take(after, proven_at)
                    return commit
                case Lost(run, proven_at):
                    telemetry.count("conflicts")
                    head.traffic.lost_at = clock()
                    await self._take(run, proven_at, catch_up=not handing)
                    if once:
                        raise Outraced
                    batch = self._hand_over(batch)
                    if not batch:
                        return None
                    losses += 1
                    if losses >= self.options.commit_attempts:
                        raise MemoryStoreError(
                            "unavailable",
                            f"{losses} commits in a row lost to other writers of {self.location}; try again.",
                        )
                    await self._after_loss(losses)
                case Passed():
                    await head.cold_start()
                case Fenced(run, proven_at):
                    await self._take(run, proven_at)
                    raise MemoryStoreError(
                        "unavailable", f"{self.location} kept failing; nothing was written. Try again later."
                    )
                case Unknown(reload):
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
        first = accepted[0][0].origin if accepted else fallback
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

    def _hand_over(self, batch: Sequence[Request]) -> list[Request]:
        """After a lost race, the requests that go on as intents (answered `HandedOver`), when the
        log folds intents; the rest, to be planned again."""
        if not self.options.fleet_commit:
            return list(batch)
        staying = []
        for request in batch:
            if request.may_hand_over and not request.outcome.done():
                request.outcome.set_exception(HandedOver())
            else:
                staying.append(request)
        return staying

    async def _take(self, run: Sequence[Commit], proven_at: float | None, *, catch_up: bool = True) -> None:
        """Apply commits read past the head; prove the head as of `proven_at`, or catch up to it
        (unless not `catch_up`: the head is then left behind, unproven, as a stale one is)."""
        for commit in run:
            self.head.apply(commit)
        if proven_at is not None:
            self.head.prove(proven_at)
        elif catch_up:
            await self.head.catch_up()

    async def _after_loss(self, losses: int) -> None:
        """Each round has one winner. After its first loss a writer waits a random part of one create,
        so that the next round has fewer contenders; after later losses it retries at once, ahead of
        those that lost fewer rounds. Against waiting longer after each loss, at 16 writers and half
        the one-log bound (make bench), the p99 fell from 30 to 15 request latencies and PUTs per
        write from 3.0 to 2.7; with every writer writing flat out, commits/s held and PUTs per commit
        rose from 5.4 to 8.8."""
        if losses == 1:
            await asyncio.sleep(deadline.clip(random.uniform(0, max(self.settler.round_seconds, 0.001))))


def _foldable(batch: Sequence[Request], state: State, seq: int) -> list[Request]:
    """The batch without the requests whose intents commit `seq` may not settle (answered `HandedOver`)."""
    staying, ids = [], set()
    for request in batch:
        intent = request.intent
        if intent is not None and (intent.id in ids or not state.folds.foldable(intent.id, intent.base, seq)):
            if not request.outcome.done():
                request.outcome.set_exception(HandedOver())
            continue
        if intent is not None:
            ids.add(intent.id)
        staying.append(request)
    return staying
