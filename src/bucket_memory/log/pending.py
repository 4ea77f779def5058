"""The intents under `pending/` as one process's fleet commit handles them: publishing its own,
reading the others' a fold of its can take (the head caught up in the same round trip), and
deleting those its commits settled."""

from __future__ import annotations

import asyncio
import logging

from ..objects.retry import gather_bounded, retrying, within_deadline
from ..runtime import deadline, telemetry
from .commit_log import CommitLog
from .intent_wait import Waiting, id_of, is_live
from .intents import Intent

logger = logging.getLogger(__name__)

# Intents one commit folds at most, and the bytes of them it reads.
FOLD_CAP = 256
FOLD_BYTES = 8 * 1024 * 1024


class PendingIntents:
    """The pending intents of `log` for one process: each `publish`ed once at its own key, read
    for a fold up to `FOLD_CAP` intents and `FOLD_BYTES`, and `clean`ed in the background once
    settled (`settle` waits for those deletions)."""

    def __init__(self, log: CommitLog) -> None:
        self.log = log
        self._cleaning: set[asyncio.Task[None]] = set()

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
        await retrying(
            lambda: self.log.objects.create(key, data),
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
        tail, sent = await head.list_tail()
        waiting.rank(tail.pending, round_seconds)
        reading = None
        if impatient or waiting.first:
            reading = asyncio.create_task(self.readable(waiting, tail.pending))
        # The head is only ever changed under the lock: nothing that touches it may outlive this call.
        try:
            await head.follow(tail.commits, tail.runs, sent)
            waiting.settled.update(head.current().folds.settled)
            waiting.known = max(waiting.known, head.seq)
            waiting.rank(tail.pending, round_seconds)
            if not impatient and not waiting.first:
                return None
            return await (reading or self.readable(waiting, tail.pending))
        finally:
            if reading is not None:
                reading.cancel()

    async def readable(self, waiting: Waiting, pending: list[str]) -> list[Intent]:
        """The `pending` intents other than ours that we can read, oldest first, up to the caps."""
        keys = [
            key
            for key in pending
            if id_of(key) != waiting.intent.id and id_of(key) not in waiting.settled and is_live(key, waiting.known)
        ][:FOLD_CAP]
        found = await gather_bounded(keys, self.log.reader.intent)
        readable, total, ids = [], 0, {waiting.intent.id}
        for other in found:
            if other is None or other.id in ids:
                continue  # a second intent of one id (forged) would make the commit settle it twice
            ids.add(other.id)
            total += other.encoded_size
            if total > FOLD_BYTES:
                break
            readable.append(other)
        return readable

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
