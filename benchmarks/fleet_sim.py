"""A discrete-event simulation of one memory's log under a fleet of writers, each its own process.

It models the protocol, not the code: requests that take a sampled latency and take effect at its
middle, commits that fold writes, and writers that race, publish intents and poll as `log.py`,
`committer.py` and `fleet.py` do. Time is virtual (an event loop whose clock jumps to the next
timer), so a thousand writers cost no more than the events they make, and no CPU enters the
figures. `make bench` runs it beside the measured cells (`benchmarks/fleet.py`) so that a reader
can see where the two agree, and what the design does past what this machine can drive.

Run `python -m benchmarks.fleet_sim` for the table of docs/performance.md.
"""

from __future__ import annotations

import argparse
import asyncio
import contextvars
import itertools
import math
import random
import selectors
from collections import Counter, deque
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from typing import Any, Literal

from .stats import percentile

# ---------------------------------------------------------------------------------------------
# Virtual time


class _InstantSelector(selectors.DefaultSelector):
    """A selector that never waits: asked to wait for `timeout`, it moves the loop's clock on."""

    def __init__(self, loop: VirtualLoop) -> None:
        super().__init__()
        self._loop = loop

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        if timeout is None:
            raise RuntimeError("the simulation is stuck: nothing is scheduled and nothing is ready")
        self._loop.virtual_time += timeout
        return super().select(0)


class VirtualLoop(asyncio.SelectorEventLoop):
    """An event loop whose clock is virtual: sleeping costs nothing, and time moves only by timers."""

    def __init__(self) -> None:
        self.virtual_time = 0.0
        super().__init__(selector=_InstantSelector(self))

    def time(self) -> float:
        return self.virtual_time


def run_virtual[T](work: Callable[[], Coroutine[Any, Any, T]]) -> T:
    """`work` on a virtual loop, which then ends as `asyncio.run` ends a real one: the writes cut off
    at the end of the cell and the housekeeping still in flight are cancelled and awaited, not left
    pending for the garbage collector to complain of."""
    with asyncio.Runner(loop_factory=VirtualLoop) as runner:
        return runner.run(work())


# ---------------------------------------------------------------------------------------------
# The bucket


type Kind = Literal["put", "get", "list", "delete"]
_tally: contextvars.ContextVar[Counter[Kind] | None] = contextvars.ContextVar("tally", default=None)


@dataclass(frozen=True, slots=True)
class Commit:
    seq: int
    writes: int  # writes it applies
    folded: frozenset[int]  # intents it settles
    at: float = 0.0  # when it was made (the time a commit carries)
    maker: int = 0  # which writer made it


@dataclass(frozen=True, slots=True)
class Intent:
    id: int
    base: int
    made: float  # when its author published it (its clock): the order intents are folded in

    @property
    def key(self) -> tuple[float, int, int]:
        return (self.made, self.base, self.id)


class Bucket:
    """One memory's objects: the log (create-only), its checkpoints and the pending intents.

    Each request waits half a sampled latency, takes effect, waits the other half. Requests are
    counted into the tally of the write that sent them (a context variable), else as housekeeping.
    """

    def __init__(self, latency: Callable[[], float]) -> None:
        self.log: dict[int, Commit] = {}
        self.pending: dict[tuple[float, int, int], Intent] = {}  # (made, base, id): keys sort oldest first
        self.checkpoint = 0
        self.runs: dict[int, tuple[int, int]] = {}  # seq -> (first, last) commit it holds
        self._latency = latency
        self.housekeeping: Counter[Kind] = Counter()

    async def _request[T](self, kind: Kind, effect: Callable[[], T]) -> T:
        tally = _tally.get()
        (tally if tally is not None else self.housekeeping)[kind] += 1
        half = self._latency() / 2
        await asyncio.sleep(half)
        result = effect()
        await asyncio.sleep(half)
        return result

    @property
    def head(self) -> int:
        return max(self.log, default=0)

    async def create(self, commit: Commit) -> bool:
        def effect() -> bool:
            if commit.seq in self.log:
                return False
            self.log[commit.seq] = commit
            return True

        return await self._request("put", effect)

    async def get(self, seq: int) -> Commit | None:
        return await self._request("get", lambda: self.log.get(seq))

    async def list_after(self, seq: int) -> tuple[list[int], list[tuple[float, int, int]]]:
        """One LIST from `log/<seq>` on: the commits after it, then the pending intents (which sort after `log/`)."""
        return await self._request("list", lambda: ([s for s in sorted(self.log) if s > seq], sorted(self.pending)))

    async def put_intent(self, intent: Intent) -> None:
        await self._request("put", lambda: self.pending.__setitem__(intent.key, intent))

    async def get_intent(self, key: tuple[float, int, int]) -> Intent | None:
        return await self._request("get", lambda: self.pending.get(key))

    async def delete_intents(self, keys: list[tuple[float, int, int]]) -> None:
        def effect() -> None:
            for key in keys:
                self.pending.pop(key, None)

        await self._request("delete", effect)

    async def get_run(self, seq: int) -> tuple[int, int] | None:
        return await self._request("get", lambda: self.runs.get(seq))

    async def put_run(self, seq: int, start: int) -> None:
        await self._request("put", lambda: self.runs.setdefault(seq, (start, seq)))

    async def load_checkpoint(self) -> int:
        """A cold start's first two requests: list the checkpoints, read the newest."""
        await self._request("list", lambda: None)
        return await self._request("get", lambda: self.checkpoint)

    async def put_checkpoint(self, seq: int) -> None:
        await self._request("put", lambda: setattr(self, "checkpoint", max(self.checkpoint, seq)))


# ---------------------------------------------------------------------------------------------
# The protocol


@dataclass(frozen=True, slots=True)
class Protocol:
    """What the writers do. `folding=False` is the protocol of one log without intents (before
    fleet commit); the rest tune the folding one, with the defaults `fleet.py` uses."""

    folding: bool = True
    runs: bool = True  # packed runs of recent commits, for catching up in one GET
    window: int = 32  # an intent is folded only within this many commits of its base
    fold_cap: int = 256  # intents one commit folds at most
    contended_for: float = 40.0  # round trips a writer lists first after it saw another's commit
    impatience: int = 2  # commits an author sees pass its intent before it races regardless
    idle_polls: int = 6  # polls that find no new commit before an author races regardless
    poll: float = 1.0  # round trips between an author's polls of the next commit after a 404
    poll_after_commit: float = 3.0  # ... and after a commit that did not settle its intent
    ghost_rounds: float = 8.0  # an older intent listed this long after it was made is not waited for
    run_every: int = 4  # a run is written at every seq divisible by this
    run_span: int = 64  # commits a run holds at most
    checkpoint_every: int = 32
    keep_polled: bool = True  # commits read while waiting are kept for the next catch-up
    kept_read: int = 8  # the newest this many of them (`waiting.KEPT_READ`)
    authors_catch_up: bool = False  # an author applies every commit before it waits (else only its folds)
    defer_reads: bool = True  # a folder that lists an older intent than its own catches up before it reads any
    # A head idle for `contended_for` round trips probed before a direct commit. Rejected: here it
    # saves lost PUTs (1.9 -> 1.4 a write at 1,000 writers), but measured, authors whose heads the
    # probe left stale read 19 intents a write in their folds (GETs 9.9 -> 27.9), which this model
    # of folding does not capture.
    probe_idle: bool = False
    loser_reads: int = 2  # keys a direct writer that lost reads at once before it goes on as an intent (no catch-up)


@dataclass
class Outcome:
    latency: float
    tally: Counter[Kind]


FETCH_CONCURRENCY = 16


class Writer:
    """One process: its cached head, whether it saw others commit lately, and its in-flight writes."""

    def __init__(self, bucket: Bucket, protocol: Protocol, round_trip: float, chance: random.Random) -> None:
        self.bucket, self.protocol, self.round_trip, self.chance = bucket, protocol, round_trip, chance
        self.head = 0  # every commit up to this one is applied
        self.recent_from = 1  # the commits this process holds, for the runs it writes
        self.settled: dict[int, int] = {}  # intent id -> the seq that folded it, from every commit read
        self.contended_until = -math.inf
        self.lock = asyncio.Lock()
        self.tasks: set[asyncio.Task[None]] = set()
        self._publishing: asyncio.Future[None] | None = None  # the latest intent's PUT, under way
        self.waiting: list[asyncio.Future[int]] = []
        self.round_seconds = round_trip
        self.confirmed_at = 0.0
        self.moments: deque[float] = deque(maxlen=16)  # when others made the last commits seen (`Traffic`)
        self.intents: dict[tuple[float, int, int], Intent] = {}  # the intents read here, while listed
        self.polled: dict[int, Commit] = {}  # commits past the head read while waiting

    @property
    def now(self) -> float:
        return asyncio.get_running_loop().time()

    def saw_others(self) -> None:
        self.contended_until = self.now + self.protocol.contended_for * self.round_trip

    def confirmed(self) -> None:
        """Note that the head is current now."""
        self.confirmed_at = self.now

    def expected_since_confirmed(self) -> float:
        """Others' commits likely made since the head was confirmed, at the rate of the last ones
        seen (`traffic.Traffic.expected`)."""
        moments = sorted(self.moments)
        if len(moments) < 2 or self.now - moments[-1] > 30.0:
            return 0.0
        rate = (len(moments) - 1) / max(moments[-1] - moments[0], 0.001 * (len(moments) - 1))
        return rate * (self.now - self.confirmed_at)

    @property
    def likely_stale(self) -> bool:
        return self.expected_since_confirmed() >= 0.5

    # Keeping the head ------------------------------------------------------------------------

    def note(self, commit: Commit) -> None:
        if commit.maker != id(self):
            self.moments.append(commit.at)
        for intent in commit.folded:
            self.settled[intent] = commit.seq

    def apply(self, commit: Commit) -> None:
        self.note(commit)
        if commit.seq == self.head + 1:
            self.head = commit.seq

    async def catch_up(self, listed: list[int] | None = None) -> None:
        """Apply every commit after the head (`head.Head.follow`, `runs.commits_through_runs`): one
        listing, then the runs that reach back to the head, one a `run_span`, and the log's commits
        from the newest run's seq on, in one round trip; the commits one GET each when no runs
        reach back, or they do not chain. A commit read while waiting is not read again."""
        if listed is None:
            listed, _ = await self.bucket.list_after(self.head)
        newest = max(listed, default=self.head)
        if newest <= self.head:
            return
        if all(seq in self.polled for seq in range(self.head + 1, newest + 1)):
            for seq in range(self.head + 1, newest + 1):
                self.apply(self.polled[seq])
        else:
            await self._fetch(newest)
        self.polled = {seq: commit for seq, commit in self.polled.items() if seq > self.head}
        self.confirmed()

    async def _log_commits(self, seqs: range) -> list[Commit]:
        """The log's commits at `seqs`: those polled as they are, the rest one GET each, in chunks."""
        held = dict(self.polled)  # polls of the process's other writes may prune it meanwhile
        unread = [seq for seq in seqs if seq not in held]
        for chunk in itertools.batched(unread, FETCH_CONCURRENCY, strict=False):
            for commit in await asyncio.gather(*(self.bucket.get(seq) for seq in chunk)):
                if commit is not None:
                    held[commit.seq] = commit
        return [held[seq] for seq in seqs]

    async def _fetch(self, newest: int) -> None:
        """Apply the commits after the head up to `newest`, through runs where they reach back."""
        top = newest - newest % self.protocol.run_every
        tops = list(range(top, self.head, -self.protocol.run_span))
        if self.protocol.runs and top - self.head >= 3 and all(seq in self.bucket.runs for seq in tops):
            found, tail = await asyncio.gather(
                asyncio.gather(*(self.bucket.get_run(seq) for seq in tops)),
                self._log_commits(range(top, newest + 1)),
            )
            reach = self.head + 1  # the first commit the runs, oldest first, must each still hold
            for seq, held in sorted(zip(tops, found, strict=True)):
                if held is None or held[0] > reach:
                    break
                reach = seq + 1
            else:
                for seq in range(self.head + 1, top):
                    self.apply(self.bucket.log[seq])  # the runs hold the commits themselves
                self.recent_from = min(self.recent_from, min(run[0] for run in found if run is not None))
                for commit in tail:
                    self.apply(commit)
                return
        for commit in await self._log_commits(range(self.head + 1, newest + 1)):
            self.apply(commit)

    def keep(self, commit: Commit) -> None:
        """Keep a commit read while waiting that the head could not take, for the next catch-up
        (the newest `kept_read`)."""
        if self.protocol.keep_polled and commit.seq > self.head:
            self.polled[commit.seq] = commit
            if len(self.polled) > self.protocol.kept_read:
                del self.polled[min(self.polled)]

    async def read_run(self, seq: int, reads: int = 4) -> bool:
        """A loser's read of the winner and the keys after it; whether a 404 proved the head."""
        run = await asyncio.gather(*(self.bucket.get(s) for s in range(seq, seq + reads)))
        for commit in run:
            if commit is None:
                self.confirmed()
                return True
            self.apply(commit)
        return False

    async def commit(self, writes: int, folded: frozenset[int]) -> bool:
        seq = self.head + 1
        started = self.now
        made = Commit(seq, writes, folded, at=self.now, maker=id(self))
        created = await self.bucket.create(made)
        self.round_seconds = self.now - started
        if created:
            self.apply(made)
            self.confirmed()
            if seq % self.protocol.checkpoint_every == 0:
                self._background(self.bucket.put_checkpoint(seq))
            if self.protocol.runs and seq % self.protocol.run_every == 0 and seq - self.recent_from >= 1:
                start = max(self.recent_from, seq - self.protocol.run_span + 1)
                self._background(self.bucket.put_run(seq, start))
        return created

    def _background(self, work: Awaitable[None]) -> None:
        """Housekeeping, counted as no write's: run apart, held until done."""

        async def run() -> None:
            _tally.set(None)
            await work

        task = asyncio.get_running_loop().create_task(run())
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def read_intents(
        self, keys: list[tuple[float, int, int]], pending: list[tuple[float, int, int]]
    ) -> list[Intent | None]:
        """The intents at `keys`, each read once while listed (`pending.PendingIntents`)."""
        listed = set(pending)
        self.intents = {key: found for key, found in self.intents.items() if key in listed}
        unread = [key for key in keys if key not in self.intents]
        read = await asyncio.gather(*(self.bucket.get_intent(key) for key in unread))
        for key, found in zip(unread, read, strict=True):
            if found is not None:
                self.intents[key] = found
        return [self.intents.get(key) for key in keys]

    # Writing ---------------------------------------------------------------------------------

    async def write(self) -> None:
        """One write, from its arrival to its acknowledgement."""
        if self.protocol.folding and (self.now < self.contended_until or self.likely_stale):
            await self.folded_write()
            return
        if (
            self.protocol.folding
            and self.protocol.probe_idle
            and self.now - self.confirmed_at > self.protocol.contended_for * self.round_trip
        ):
            # `fleet.Fleet.submit`: a head idle this long says nothing of others: one GET tells
            async with self.lock:
                following = await self.bucket.get(self.head + 1)
                if following is not None:
                    self.apply(following)  # and no catch-up: the intent needs none
                else:
                    self.confirmed()
            if following is not None:
                await self.folded_write()
                return
        outcome: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self.waiting.append(outcome)
        if not self.lock.locked():
            asyncio.get_running_loop().create_task(self._drain())
        if await outcome < 0:  # lost its race: from now on, intents
            await self.folded_write()

    async def _drain(self) -> None:
        """Group commit within the process: the waiting writes go in the next commit."""
        async with self.lock:
            while self.waiting:
                batch, self.waiting = self.waiting, []
                losses = 0
                while True:
                    if await self.commit(len(batch), frozenset()):
                        for outcome in batch:
                            outcome.set_result(self.head)
                        break
                    self.saw_others()
                    reads = self.protocol.loser_reads if self.protocol.folding else 4
                    if not await self.read_run(self.head + 1, reads) and not self.protocol.folding:
                        await self.catch_up()
                    losses += 1
                    if self.protocol.folding:
                        for outcome in batch:
                            outcome.set_result(-1)
                        break
                    if losses == 1:
                        await asyncio.sleep(self.chance.uniform(0, self.round_seconds))

    def _older(self, intent: Intent, pending: list[tuple[float, int, int]], known: int) -> set[int]:
        """The ids of the intents listed before ours, live and made lately (`fleet.waiting.Waiting.rank`)."""
        since = self.now - self.protocol.ghost_rounds * self.round_seconds
        return {
            key[2] for key in pending if key < intent.key and key[1] + self.protocol.window > known and key[0] >= since
        }

    async def folded_write(self) -> None:
        """`fleet.Fleet._one_intent`: publish an intent as the log and pending/ are listed (after
        listing, when the head is too stale to be its base); read the newest commit if older intents
        are pending; race when ours is the oldest, else poll for the commit that settles it."""
        protocol, bucket = self.protocol, self.bucket
        lately = self.now - self.confirmed_at < protocol.contended_for * self.round_trip
        if lately and self.expected_since_confirmed() < protocol.window / 4:
            intent = Intent(self.chance.getrandbits(64), self.head, self.now)
            (listed, pending), _ = await asyncio.gather(bucket.list_after(self.head), bucket.put_intent(intent))
        else:
            listed, pending = await bucket.list_after(self.head)
            intent = Intent(self.chance.getrandbits(64), max(listed, default=self.head), self.now)
            self._publishing = asyncio.ensure_future(bucket.put_intent(intent))  # counted as the write's
        known = max(listed, default=self.head)  # the newest commit seen; the head may be behind it
        older = self._older(intent, pending, known)
        if protocol.authors_catch_up:
            async with self.lock:
                await self.catch_up(listed)
        elif older - self.settled.keys() and known > self.head and (newest := await bucket.get(known)):
            self.apply(newest)  # the newest commit, which may have settled them
            self.keep(newest)
        passed = idle = 0
        while True:
            if intent.id in self.settled:
                return
            if known >= intent.base + protocol.window:  # past its window: plan it again (`fleet.waiting.Replan`)
                intent = Intent(self.chance.getrandbits(64), known, self.now)
                self._publishing = asyncio.ensure_future(bucket.put_intent(intent))
                older, passed, idle = set(), 0, 0
            first = not older - self.settled.keys()
            if first or passed >= protocol.impatience or idle >= protocol.idle_polls:
                settled, older = await self.fold(intent, impatient=not first)
                if settled:
                    return
                known, passed, idle = max(known, self.head), 0, 0
                continue
            sent = self.now
            commit = await bucket.get(known + 1)
            if commit is not None:
                known, idle, passed = commit.seq, 0, passed + 1
                self.apply(commit)
                self.keep(commit)
            else:
                idle += 1
            if intent.id not in self.settled and older - self.settled.keys() and passed < protocol.impatience:
                pause = protocol.poll_after_commit if commit is not None else protocol.poll
                await asyncio.sleep(max(0.0, sent + pause * self.round_seconds - self.now))

    async def fold(self, intent: Intent, *, impatient: bool) -> tuple[bool, set[int]]:
        """`folding.Folder.fold`: list the log and pending/, catch up and read the intents in one round
        trip, step back if an older intent turned up (unless impatient), else race for the next key
        with ours and theirs. Whether ours is settled, and the older intents seen."""
        async with self.lock:
            listed, pending = await self.bucket.list_after(self.head)

            def unsettled() -> list[tuple[float, int, int]]:
                live = [key for key in pending if key[2] != intent.id and key[2] not in self.settled]
                return live[: self.protocol.fold_cap - 1]

            live = unsettled()
            if (
                self.protocol.defer_reads
                and not impatient
                and self._older(intent, pending, self.head) - self.settled.keys()
            ):
                await self.catch_up(listed)
                live = unsettled()
                read = (
                    await self.read_intents(live, pending)
                    if not (self._older(intent, pending, self.head) - self.settled.keys())
                    else []
                )
            else:
                read, _ = await asyncio.gather(self.read_intents(live, pending), self.catch_up(listed))
            older = self._older(intent, pending, self.head)
            if intent.id in self.settled:
                return True, older
            if older - self.settled.keys() and not impatient:
                return False, older
            folded = frozenset(
                {intent.id}
                | {
                    found.id
                    for found in read
                    if found is not None
                    and found.id not in self.settled
                    and found.base < self.head + 1 <= found.base + self.protocol.window
                }
            )
            if await self.commit(len(folded), folded):
                done = [*live, intent.key]
                self._background(self.bucket.delete_intents(done))
                return True, older
            self.saw_others()
            await self.read_run(self.head + 1)
            return intent.id in self.settled, older


# ---------------------------------------------------------------------------------------------
# A cell of the table


@dataclass(frozen=True, slots=True)
class Cell:
    writers: int
    load: float  # offered writes as a share of what one serial log carries (one per two round trips)
    seconds: float = 60.0
    round_trip: float = 0.05
    lognormal: float = 0.0  # sigma of a lognormal latency with the round trip as its median (0: fixed)


def simulate(cell: Cell, protocol: Protocol, seed: int = 1) -> dict[str, Any]:
    """Run one cell: Poisson arrivals over `seconds`, latency from each scheduled arrival."""
    chance = random.Random(seed)

    def latency() -> float:
        if cell.lognormal == 0:
            return cell.round_trip
        return cell.round_trip * math.exp(chance.gauss(0, cell.lognormal))

    async def run() -> dict[str, Any]:
        bucket = Bucket(latency)
        writers = [
            Writer(bucket, protocol, cell.round_trip, random.Random(chance.random())) for _ in range(cell.writers)
        ]
        rate = cell.load / (2 * cell.round_trip)
        outcomes: list[Outcome] = []
        unfinished = 0

        async def one(writer: Writer, arrived: float) -> None:
            tally: Counter[Kind] = Counter()
            _tally.set(tally)
            await writer.write()
            outcomes.append(Outcome(asyncio.get_running_loop().time() - arrived, tally))

        tasks: list[asyncio.Task[None]] = []
        now = 0.0
        while True:
            now += chance.expovariate(rate)
            if now >= cell.seconds:
                break
            await asyncio.sleep(now - asyncio.get_running_loop().time())
            writer = chance.choice(writers)
            tasks.append(asyncio.create_task(one(writer, now)))
        # Writes still waiting well after the load ended are a backlog, not latency.
        _, waiting = await asyncio.wait(tasks, timeout=60 * cell.round_trip * 20)
        unfinished = len(waiting)
        for task in waiting:
            task.cancel()
        offered = len(tasks)
        latencies = sorted(outcome.latency / cell.round_trip for outcome in outcomes)
        totals: Counter[Kind] = Counter()
        for outcome in outcomes:
            totals.update(outcome.tally)
        served = len(outcomes)

        def pct(q: float) -> float:
            return percentile(latencies, q) if latencies else math.inf

        in_time = sum(1 for outcome in outcomes if outcome.latency <= 60.0)
        return {
            "writers": cell.writers,
            "load": cell.load,
            "offered_per_s": offered / cell.seconds,
            "served_share": in_time / offered if offered else 1.0,
            "unfinished": unfinished,
            "p50": pct(0.5),
            "p99": pct(0.99),
            "p999": pct(0.999),
            "puts": totals["put"] / max(served, 1),
            "gets": totals["get"] / max(served, 1),
            "lists": totals["list"] / max(served, 1),
            "commits": bucket.head,
            "housekeeping_per_write": sum(bucket.housekeeping.values()) / max(served, 1),
        }

    return run_virtual(run)


CELLS = [
    Cell(1, 0.25),
    Cell(16, 0.5),
    Cell(64, 2.0),
    Cell(256, 4.0),
    Cell(1000, 8.0),
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--before", action="store_true", help="also the protocol without intents")
    parser.add_argument("--no-runs", action="store_true", help="also the protocol without runs")
    parser.add_argument("--alternatives", action="store_true", help="also the rejected alternatives")
    arguments = parser.parse_args()
    protocols = [("folding", Protocol())] + ([("one log", Protocol(folding=False))] if arguments.before else [])
    protocols += [("no runs", Protocol(runs=False))] if arguments.no_runs else []
    if arguments.alternatives:
        protocols += [
            ("authors catch up", Protocol(authors_catch_up=True)),
            ("intents read as the head catches up", Protocol(defer_reads=False)),
            ("an idle head probed first", Protocol(probe_idle=True)),
            ("a direct loser reads four keys", Protocol(loser_reads=4)),
        ]
    print("| protocol | writers | load | served | p50 | p99 | p99.9 | PUTs | GETs | LISTs | commits |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for name, protocol in protocols:
        for cell in CELLS:
            cell = Cell(cell.writers, cell.load, seconds=arguments.seconds)
            row = simulate(cell, protocol)
            print(
                f"| {name} | {row['writers']} | {row['load']:.2f} | {row['served_share']:.0%} | {row['p50']:.1f} | "
                f"{row['p99']:.1f} | {row['p999']:.1f} | {row['puts']:.2f} | {row['gets']:.2f} | "
                f"{row['lists']:.2f} | {row['commits']} |"
            )


if __name__ == "__main__":
    main()
