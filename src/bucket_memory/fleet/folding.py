"""Folding: an author's race for the next log key with its own intent and the pending intents of
others it can read, oldest first, each planned on the state at that point exactly as a caller's
own plan is (`batch.plan_batch`), and settled by a `Fold` record in the commit."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from a13n_harness.providers.memory import FileFormat

from ..format.changes import Change
from ..log.batch import Answer, Lost, Plan, Request, consume
from ..log.commit_log import CommitLog
from ..log.committer import Committed, Stale
from ..runtime import deadline, telemetry
from ..state.folds import FoldWindow
from ..state.state import State
from .intents import Intent
from .pending import PendingIntents
from .waiting import Outcome, Settled, Waiting, past_window, settled_at


class Folder:
    """Races for the next key of `log` on an author's behalf, folding the pending intents it can
    read (`pending`) into the commit, others' planned under `max_bytes` as our own writes are.
    `fold` tells what became of the author's intent, or None when it is not settled yet (another
    won the key without settling it, or an older intent's author is to race first)."""

    def __init__(self, log: CommitLog, pending: PendingIntents, *, max_bytes: int) -> None:
        self.log = log
        self.pending = pending
        self.max_bytes = max_bytes

    async def fold(self, waiting: Waiting, round_seconds: float) -> Outcome | None:
        """Race for the next key with our intent and the pending ones we can read, oldest first:
        what became of ours, or None when another writer won the key without settling it, or an
        older intent than ours turned up in the listing (its author races; we wait). A refusal of
        ours, planned on the exact state before our commit, is raised: it is the answer."""
        log, intent = self.log, waiting.intent
        impatient = not waiting.first
        async with log.exclusive():
            head = log.head
            # A write of this process that held the lock meanwhile may have folded ours with it.
            if head.cached is not None and (seq := head.cached.folds.settled.get(intent.id)) is not None:
                return await settled_at(log.reader, seq, intent)
            others = await self.pending.caught_up_and_read(waiting, round_seconds, impatient=impatient)
            # Another's commit settled it meanwhile.
            if (seq := head.current().folds.settled.get(intent.id)) is not None:
                return await settled_at(log.reader, seq, intent)
            if others is None:
                # Others who published as we listed each saw no one older: only the oldest races.
                return None
            if waiting.published is not None and not waiting.published.done():
                # Committed before its own create landed, the intent would be left behind once the
                # clean-up below ran (one create more a write, never two applications).
                await asyncio.wait([waiting.published])
            genesis = head.current().genesis
            folding = sorted([intent, *(other for other in others if other.belongs_to(genesis))], key=_age)
            batch = [self._request(one, mine=one is intent) for one in folding]
            since = log.options.clock()
            try:
                while isinstance(attempt := await log.committer.attempt(batch, since=since), Stale):
                    pass  # the head moved under a plan that committed nothing: plan on it again
            finally:
                for request in batch:
                    request.outcome.add_done_callback(consume)
            window = head.current().folds
        ours = next(request for request, one in zip(batch, folding, strict=True) if one is intent)
        landed = isinstance(attempt, Committed)
        return await self._after(waiting, [one.key for one in folding], ours, window, landed=landed)

    async def _after(
        self, waiting: Waiting, keys: list[str], ours: Request, window: FoldWindow, *, landed: bool
    ) -> Outcome | None:
        """What a fold of the intents at `keys` (ours among them, as `ours`), after which the head's
        window was `window`, tells our author."""
        head, intent = self.log.head, waiting.intent
        waiting.known = max(waiting.known, head.seq)
        waiting.passed = waiting.idle = 0
        if landed:
            self.log.folded()
            # Each intent of the batch is settled now, by this commit or (left out of it) before.
            self.pending.clean(keys)
        if ours.outcome.done():  # settled by this commit (else left out of it, or the race lost)
            telemetry.count("folded", len(keys) - 1)
            result = ours.outcome.result()  # raises our refusal
            assert result is not None and not isinstance(result, Lost), "an operation's commit names a version"
            return Settled(result)
        if (seq := window.settled.get(intent.id)) is not None:
            return await settled_at(self.log.reader, seq, intent)
        if not window.foldable(intent.id, intent.base, head.seq + 1):
            return await past_window(self.log.reader, window.settled, intent)
        return None

    def _request(self, intent: Intent, *, mine: bool) -> Request:
        """The commit request of `intent`: ours planned as its caller asked, another's after the
        checks a store of ours makes (`_checked_plan`)."""
        plan = intent.operation.plan if mine else _checked_plan(intent, self.log.format, self.max_bytes)
        outcome: asyncio.Future[Answer] = asyncio.get_running_loop().create_future()
        end = deadline.end_after(self.log.options.operation_timeout)
        return Request(plan, intent.origin, outcome, end, intent=intent, operation=intent.operation)


def _checked_plan(intent: Intent, fmt: FileFormat, max_bytes: int) -> Plan:
    """Another's intent planned as its author's store would, after the checks a store of ours makes."""

    def plan(state: State) -> Sequence[Change]:
        return intent.checked(fmt, max_bytes).plan(state)

    return plan


def _age(intent: Intent) -> str:
    return intent.key
