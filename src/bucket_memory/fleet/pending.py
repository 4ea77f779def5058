"""The intents under `pending/` as one process's fleet commit handles them: publishing its own,
reading the others' a fold of its can take (the head caught up in the same round trip), and
deleting those its commits settled."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Sequence

from ..format.signed import CorruptObjectError
from ..log.commit_log import CommitLog
from ..log.reader import gapless
from ..objects.interface import CREATE, AlreadyExists
from ..objects.retry import gather_bounded, retrying, within_deadline
from ..runtime import deadline, telemetry
from .intents import Intent, read_intent
from .waiting import Waiting, foldable_after, id_of

logger = logging.getLogger(__name__)

# Intents one commit folds at most, and the bytes of them it reads (objects that are none do not count).
FOLD_CAP = 256
FOLD_BYTES = 8 * 1024 * 1024


class PendingIntents:
    """The pending intents of `log` for one process: each `publish`ed once at its own key, read
    for a fold up to `FOLD_CAP` intents and `FOLD_BYTES`, and `clean`ed in the background once
    settled (`settle` waits for those deletions). Each key is read once while it is listed (an
    intent is created once at a key only its author uses, and never changed), up to `FOLD_BYTES`
    of them kept; what lies under `pending/` but is no intent a commit here can settle is deleted,
    or remembered as such."""

    def __init__(self, log: CommitLog) -> None:
        self.log = log
        self._cleaning: set[asyncio.Task[None]] = set()
        self._unfoldable: set[str] = set()  # keys read here and found to hold nothing a commit can settle
        # The intents read here, by key, while listed: at most `FOLD_BYTES` of them (what a fold takes).
        self._read_here: dict[str, Intent] = {}
        self._read_bytes = 0

    @property
    def location(self) -> str:
        return self.log.location

    async def settle(self) -> None:
        """Wait until the deletions of settled intents started here are done."""
        while self._cleaning:
            await asyncio.wait(list(self._cleaning))

    async def publish(self, intent: Intent) -> None:
        """Create the intent's key (no one else uses it; a transport's resend finds our own)."""
        key, data = intent.key, intent.encode()
        telemetry.count("intents")
        with contextlib.suppress(AlreadyExists):  # our own, landed by an attempt whose reply was lost
            await retrying(
                lambda: self.log.objects.put(key, data, CREATE),
                what=f"Publishing {self.location}/{key}",
                attempts=self.log.options.request_attempts,
            )

    async def caught_up_and_read(
        self, waiting: Waiting, round_seconds: float, *, impatient: bool
    ) -> list[Intent] | None:
        """Under the lock: the head caught up by one listing and the intents it names read, oldest
        first; None when an older intent than ours is pending and we are not impatient (its author
        races). Intents are read while the head catches up, unless the listing already shows an older
        one than ours: then only once the head proves it settled (reads a step-back would waste)."""
        head = self.log.head
        await head.loaded()
        sent = self.log.options.clock()
        tail = await self.log.reader.list_tail(after=head.seq)  # `follow` applies its commits
        pending = self.worth_reading(tail.pending)
        waiting.known = max([waiting.known, *(seq for seq, _ in gapless(tail.commits, head.seq))])
        waiting.rank(pending, round_seconds)
        reading = None
        if impatient or waiting.first:
            reading = asyncio.create_task(self.readable(waiting, pending))
        # The head is only ever changed under the lock: nothing that touches it may outlive this call.
        try:
            await head.follow(tail.commits, tail.runs, sent, read=waiting.read)
            waiting.settled.update(head.current().folds.settled)
            waiting.known = max(waiting.known, head.seq)
            waiting.rank(pending, round_seconds)
            if not impatient and not waiting.first:
                return None
            return await (reading or self.readable(waiting, pending))
        finally:
            if reading is not None:
                reading.cancel()

    def worth_reading(self, pending: Sequence[str]) -> list[str]:
        """The keys of a listing of every pending intent, less those this process found never
        foldable here (forgotten once no longer listed, so what is kept is bounded by the listing, as
        are the intents read here)."""
        self._unfoldable.intersection_update(pending)
        listed = set(pending)
        self._read_here = {key: intent for key, intent in self._read_here.items() if key in listed}
        self._read_bytes = sum(intent.encoded_size for intent in self._read_here.values())
        return [key for key in pending if key not in self._unfoldable]

    async def readable(self, waiting: Waiting, pending: Sequence[str]) -> list[Intent]:
        """The `pending` intents other than ours that the commit after `waiting.known` may settle,
        oldest first, up to `FOLD_CAP` of them and `FOLD_BYTES`. An object that is not an intent of
        this memory is read at most once here and never counts against the caps: one that does not
        decode or names another memory is deleted (no commit can ever settle it, and a write is
        acknowledged only by the commit that settles it, so deleting it loses none), one that names
        no memory is remembered (`worth_reading`)."""
        ours, genesis = waiting.intent.id, self.log.head.current().genesis
        keys = [
            key
            for key in pending
            if id_of(key) != ours and id_of(key) not in waiting.settled and foldable_after(key, waiting.known)
        ]
        readable: list[Intent] = []
        garbage: list[str] = []
        total, ids, start = 0, {ours}, 0
        while start < len(keys) and len(readable) < FOLD_CAP and total <= FOLD_BYTES:
            chunk = keys[start : start + FOLD_CAP - len(readable)]
            start += len(chunk)
            for key, found in zip(chunk, await gather_bounded(chunk, self._read), strict=True):
                if isinstance(found, CorruptObjectError) or (found is not None and found.foreign(genesis)):
                    garbage.append(key)
                elif found is not None and not found.belongs_to(genesis):
                    self._unfoldable.add(key)
                elif found is not None and found.id not in ids and total + found.encoded_size <= FOLD_BYTES:
                    ids.add(found.id)  # a second intent of one id (forged) would make the commit settle it twice
                    total += found.encoded_size
                    readable.append(found)
                elif found is not None and found.id not in ids:
                    total = FOLD_BYTES + 1  # full: the rest waits for the next commit
                    break
        if garbage:
            logger.info("%s: deleting %d objects under pending/ that no commit can settle", self.location, len(garbage))
            self._unfoldable.update(garbage)
            self.clean(garbage)
        return readable

    async def _read(self, key: str) -> Intent | CorruptObjectError | None:
        """The intent at `key` (read once while listed); None when it is gone; the error naming why
        the object there is not one a writer made."""
        if (known := self._read_here.get(key)) is not None:
            return known
        data = await self.log.reader.get(key)
        if data is None:
            return None
        try:
            intent = read_intent(self.location, key, data)
        except CorruptObjectError as error:
            return error
        if self._read_bytes + intent.encoded_size <= FOLD_BYTES:
            self._read_here[key] = intent
            self._read_bytes += intent.encoded_size
        return intent

    def clean(self, keys: list[str]) -> None:
        """Delete the intents a commit of ours settled, apart from the callers (their results are in)."""

        async def clean() -> None:
            try:
                with deadline.within(self.log.options.operation_timeout):
                    await within_deadline(
                        lambda: self.log.objects.delete(keys), what=f"Deleting settled intents of {self.location}"
                    )
            except Exception as error:  # housekeeping: compaction deletes what is left
                logger.info("%s: settled intents left for compaction: %s", self.location, error)

        task = asyncio.create_task(clean())
        self._cleaning.add(task)
        task.add_done_callback(self._cleaning.discard)
