"""Fleet commit: writers in many processes share commits through the bucket alone.

One log commits one key per round, whoever races for it; group commit within a process never
helps a fleet of processes. A write that meets other writers (it lost a race, or others commit
often enough that its head is surely stale) is therefore published as an intent
(`intents.Intent`) under `pending/`, and whoever creates the next log key folds the pending
intents into its commit (`folding.Folder`), settling each by a `Fold` record in the commit.

An author waits for the commit that settles its intent by polling the next log key, and races
for the key itself, folding every intent it can read, when its own is the oldest pending, or
after `IMPATIENCE` commits passed it by, or after `IDLE_POLLS` polls found the log standing
still: someone always races, and no intent waits behind a crashed author. What an author is
told is what the log proves: its intent applied at the commit that settled it, unchanged there,
or refused (then planned again on a head proven current: a refusal there is the answer); a
commit settles an intent at most once, within `FOLD_WINDOW` commits of its base (`folds.py`);
`write_unconfirmed` only when the author gave up without that proof (invariant 9 of `log/commit_log.py`).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence

from a13n_harness.providers.memory import MemoryStoreError, Origin

from ..format.codec import Commit
from ..format.tombstone import MemoryDestroyed, destroyed
from ..log.batch import Lost
from ..log.commit_log import CommitLog
from ..log.committer import unconfirmed
from ..log.reader import gapless
from ..objects.retry import retrying
from ..runtime import deadline
from ..state.folds import FOLD_WINDOW
from ..state.operations import Operation
from .folding import Folder
from .intents import Intent
from .pending import PendingIntents
from .waiting import Outcome, Replan, Settled, Waiting, outcome_of, past_window

logger = logging.getLogger(__name__)

# Create latencies an author waits after a commit before it polls for the next (after a 404, one).
POLL_AFTER_COMMIT = 3
# After losing a race, a process publishes its writes as intents for this many create latencies.
CONTENDED_ROUNDS = 40
# A head that others have likely moved by this many commits or more is listed before its
# intent is published, so that its base is the head, not a head the window has left behind.
STALE_BASE = FOLD_WINDOW // 4


class Fleet:
    """The writes of one process to one log, each committed directly or through an intent.

    `submit` commits a mutation as the log would (one conditional PUT when uncontended), unless
    this process has lately lost a race or expects others' commits since its head was proven:
    then, or when the direct commit loses, the mutation is published as an intent and its author
    waits for the commit that settles it, racing for the key when its turn comes.
    """

    def __init__(self, log: CommitLog, *, max_bytes: int) -> None:
        self.log = log
        self.pending = PendingIntents(log)
        # Others' intents are planned under our quota, as our own writes are.
        self.folder = Folder(log, self.pending, max_bytes=max_bytes)
        # Intents of ours whose fate we have not learned, by key: one interrupted while pending may
        # still be settled by another writer within its window, which the command line must say.
        self.unsettled: dict[str, Intent] = {}

    @property
    def location(self) -> str:
        return self.log.location

    def contended(self) -> bool:
        """Whether a write now would likely meet others': it lost a race lately, or others commit
        often enough that the head, as last proven, is probably stale."""
        head, clock = self.log.head, self.log.options.clock
        if clock() - head.traffic.lost_at < self._contended_seconds:
            return True
        return head.cached is not None and self._expected_since_proven() >= 0.5

    async def submit(self, operation: Operation, origin: Origin) -> int | str:
        """Commit `operation`; its new version (a seq), or the version a write left unchanged."""
        self.log.check_writable()
        called = self.log.options.clock()
        with deadline.within(self.log.options.operation_timeout):
            if not self.log.options.fleet_commit:
                return await self.log.commit(operation.plan, origin, operation=operation)
            if not self.contended():
                version = await self.log.try_commit(operation, origin)
                if not isinstance(version, Lost):
                    return version
                # It lost its race: from here on, an intent.
            return await self._through_intents(operation, origin, called)

    async def settle(self) -> None:
        """Wait until the deletions of settled intents started here are done."""
        await self.pending.settle()

    @property
    def _contended_seconds(self) -> float:
        """How long a lost race (or a proven head) tells of others: `CONTENDED_ROUNDS` creates."""
        return CONTENDED_ROUNDS * max(self.log.committer.settler.round_seconds, 0.025)

    @property
    def _round_seconds(self) -> float:
        """How long a create took here last: the length of a round, for pacing polls."""
        return max(self.log.committer.settler.round_seconds, 0.005)

    def _expected_since_proven(self) -> float:
        head = self.log.head
        return head.traffic.expected(time.time(), self.log.options.clock() - head.confirmed_at)

    async def _through_intents(self, operation: Operation, origin: Origin, called: float) -> int | str:
        """Publish `operation` as an intent until one is settled. A head proven current since the
        call (a lost race reads the winner and a 404 after it) is planned on first, and a refusal
        there is the answer (invariant 5), with no intent; so is one on a head proven current
        after another's commit refused an intent of ours."""
        for _ in range(self.log.options.commit_attempts):
            await self._refuse_early(operation, called)
            match await self._one_intent(operation, origin):
                case Settled(version):
                    if isinstance(version, int):
                        self.log.head.owed = max(self.log.head.owed, version)
                    return version
                case Replan():
                    # The next round begins here: the probe below proves the head since, so that
                    # round plans on it with no second probe.
                    called = self.log.options.clock()
                    async with self.log.exclusive():
                        await self.log.head.loaded()
                        await self.log.head.probe()
        # An intent of it may still be settled within its window: that is not "not written".
        raise unconfirmed(self.location, self.log.head.seq + 1)

    async def _refuse_early(self, operation: Operation, called: float) -> None:
        """Plan `operation` on the cached head before an intent of it is published: a refusal on a
        head proven since the call is the answer (invariant 5); on an older head, it is proven by
        a probe first (a write that would surely be refused is never published: an intent is
        stored, and its text with it, for all that erasure can tell)."""
        head = self.log.head
        async with self.log.exclusive():
            state = await head.loaded()
            if head.confirmed_at < called and operation.expected is not None:
                # A change to a file that exists is planned on a head proven now (one GET): a write
                # built on a text since erased is refused here, never stored in an intent.
                await head.probe()
                state = head.current()
            try:
                operation.plan(state.layered())
            except MemoryStoreError:
                if head.confirmed_at >= called:
                    raise
                await head.probe()
                operation.plan(head.current().layered())

    async def _one_intent(self, operation: Operation, origin: Origin) -> Outcome:
        """One intent of `operation`, from publishing it to the commit that settles it. Once its
        publishing has begun, a failure that proves nothing is `write_unconfirmed`: whoever
        commits next may still settle it, within its window."""
        head, reader = self.log.head, self.log.reader
        if reader.destroyed:  # a warm store that met the destroy publishes nothing more
            raise destroyed(self.location)
        async with self.log.exclusive():
            state = await head.loaded()
        intent: Intent | None = None
        publishing: asyncio.Task[None] | None = None
        # A head proven lately, and recent enough to be the base: publish as we list. (One idle for
        # long, even one a single GET found behind, may be any number of commits behind.)
        lately = self.log.options.clock() - head.confirmed_at < self._contended_seconds
        if lately and self._expected_since_proven() < STALE_BASE:
            intent = Intent.create(operation, origin, base=state.head, genesis=state.genesis, made=time.time())
            publishing = self._publish(intent)
        try:
            tail = await reader.list_tail(after=state.head)
            known = max((seq for seq, _ in gapless(tail.commits, state.head)), default=state.head)
            # Never a second intent for one write while the first may be settled: one whose head was
            # staler than expected has a shorter window, and once past it, provably never applied,
            # is planned again.
            if intent is None:
                intent = Intent.create(operation, origin, base=known, genesis=state.genesis, made=time.time())
                publishing = self._publish(intent)
            assert publishing is not None
            # The intents the head's window settled (ours, their deletion under way, among them) are not older ones.
            waiting = Waiting(intent, known, settled=set(state.folds.settled), published=publishing)
            outcome = await self._wait(waiting, self.pending.worth_reading(tail.pending))
            del self.unsettled[intent.key]  # settled, or provably never to be
            return outcome
        except MemoryDestroyed:
            if intent is not None and publishing is not None:
                await self._withdraw(intent, publishing)
            raise
        except MemoryStoreError as error:
            if publishing is not None and error.code == "unavailable":
                raise unconfirmed(self.location, state.head + 1) from None
            raise
        except Exception:
            if publishing is None:
                raise
            logger.exception("%s: unexpected failure while an intent was pending", self.location)
            raise unconfirmed(self.location, state.head + 1) from None
        finally:
            if publishing is not None:
                publishing.add_done_callback(_consumed)

    def _publish(self, intent: Intent) -> asyncio.Task[None]:
        """Begin to create the intent's key; from here on it may be settled, until we learn its fate
        (or the head passes its window: a long-lived process keeps no more than a window's worth)."""
        head = self.log.head.seq
        self.unsettled = {key: kept for key, kept in self.unsettled.items() if head < kept.base + FOLD_WINDOW}
        self.unsettled[intent.key] = intent
        return asyncio.create_task(self.pending.publish(intent))

    async def _withdraw(self, intent: Intent, publishing: asyncio.Task[None]) -> None:
        """Delete our intent from a memory found destroyed: it holds our write's text, and the
        destroy's last listing may have come before it landed. On a versioned bucket the text stays
        in an old version, which only `destroy` run again deletes (agents hold no DeleteObjectVersion)."""
        await asyncio.wait([publishing])
        self.unsettled.pop(intent.key, None)
        try:
            await retrying(
                lambda: self.log.objects.delete([intent.key]),
                what=f"Withdrawing {self.location}/{intent.key}",
                attempts=self.log.options.request_attempts,
            )
        except MemoryStoreError as error:  # the refusal is the answer; the intent is the destroy's to delete
            logger.warning("%s: could not withdraw %s from the destroyed memory: %s", self.location, intent.key, error)

    async def _wait(self, waiting: Waiting, pending: Sequence[str]) -> Outcome:
        """Poll for the commit that settles our intent, racing for the next key when our turn comes."""
        reader = self.log.reader
        round_seconds = self._round_seconds
        waiting.rank(pending, round_seconds)
        # The newest commit, unread, may have settled the older intents we saw.
        if not waiting.first and waiting.known > self.log.head.seq and (newest := await reader.commit(waiting.known)):
            waiting.note(newest)
        while True:
            if waiting.mine is not None:
                return outcome_of(*waiting.mine, waiting.intent)
            if self.log.head.seq >= waiting.intent.base + FOLD_WINDOW:
                # No commit past the window can settle it; one in it may have, unseen by us.
                return await past_window(self.log.reader, self.log.head.current().folds.settled, waiting.intent)
            if waiting.turn:
                if (outcome := await self.folder.fold(waiting, round_seconds)) is not None:
                    return outcome
                continue
            sent = time.monotonic()
            commit = await reader.commit(waiting.known + 1)
            if commit is not None:
                waiting.idle = 0
                waiting.passed += 1
                waiting.note(commit, void=await self._applied_void(commit))
            else:
                waiting.idle += 1
            if waiting.mine is None and not waiting.turn:
                # A fold takes a listing, reads and a create: after a commit, the next is that far off.
                pause = round_seconds * (POLL_AFTER_COMMIT if commit is not None else 1)
                await asyncio.sleep(deadline.clip(max(0.0, sent + pause - time.monotonic())))

    async def _applied_void(self, commit: Commit) -> bool:
        """Apply a commit read while waiting, when it follows the cached head (keeping it current for
        free); whether it was void. One read past the head is taken at its word: a commit's fold
        records are its folder's claim, which no reader can check (docs/decisions/019-trust-model.md)."""
        async with self.log.exclusive():
            head = self.log.head
            if head.cached is not None and head.seq == commit.seq - 1:
                return head.apply(commit) is not None
            return False


def _consumed(task: asyncio.Task[None]) -> None:
    if not task.cancelled():
        task.exception()  # a publish that failed: the author folds its own intent in time
