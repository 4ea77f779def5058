"""Virtual time for a simulated run: sleeps, latencies and deadlines cost no wall time, and a run
replays exactly from its seed.

`VirtualEventLoop` is an asyncio loop whose clock is `VirtualClock`: when nothing is ready to run,
it jumps the clock to the next timer instead of waiting for it, and work sent to a thread runs at
once. `virtual_world` also points `time.time`, `time.monotonic`, the `random` module and
`secrets.token_hex` (intent and commit ids, salts) at the run's clock and seed for as long as the
run lasts, so that every key, id and retry pause the store draws is the same on a replay.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import secrets
import selectors
import time
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

# Where the simulated epoch starts: any fixed moment works; this one reads as a plausible date.
EPOCH = 1_800_000_000.0


class VirtualClock:
    """Seconds since the epoch on the simulated timeline; moves only when the loop idles or a test moves it."""

    def __init__(self, start: float = EPOCH) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += max(0.0, seconds)


class _JumpingSelector(selectors.SelectSelector):
    """Polls the loop's own file descriptors without waiting, and where the loop would have waited
    for its next timer, moves the virtual clock to it instead."""

    def __init__(self, clock: VirtualClock) -> None:
        super().__init__()
        self.clock = clock

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        ready = super().select(0)
        if ready or timeout is None or timeout <= 0:
            if not ready and timeout is None:
                raise RuntimeError("simulation deadlocked: nothing is ready and no timer is due")
            return ready
        self.clock.advance(timeout)
        return []


class VirtualEventLoop(asyncio.SelectorEventLoop):
    """An event loop on `clock`: `time()` is virtual, and idle time is skipped, not waited."""

    def __init__(self, clock: VirtualClock) -> None:
        super().__init__(_JumpingSelector(clock))
        self.clock = clock
        # Timers due within this are run: at seconds since the epoch a float steps by 2.4e-7, so the
        # default (1e-9) would leave a timer due now waiting forever for a clock that never moves.
        self._clock_resolution = 1e-6

    def time(self) -> float:
        return self.clock.now

    def run_in_executor(self, executor: Any, func: Callable[..., Any], *args: Any) -> asyncio.Future[Any]:  # type: ignore[override]
        """Run `func` here and now: a worker thread would finish at a wall-clock moment the virtual
        clock knows nothing of, and the run would no longer replay exactly."""
        future: asyncio.Future[Any] = self.create_future()
        try:
            future.set_result(func(*args))
        except BaseException as error:  # delivered to the awaiting task, as the executor would
            future.set_exception(error)
        return future


@contextlib.contextmanager
def virtual_world(clock: VirtualClock, seed: int) -> Iterator[None]:
    """Point the clocks and random draws the store reads at `clock` and `seed`, restoring them after."""
    draws = random.Random(f"token-{seed}")
    saved_state = random.getstate()
    saved = (time.time, time.monotonic, secrets.token_hex)

    def token_hex(nbytes: int | None = None) -> str:
        return draws.randbytes(32 if nbytes is None else nbytes).hex()

    random.seed(f"store-{seed}")
    time.time, time.monotonic, secrets.token_hex = clock, clock, token_hex
    try:
        yield
    finally:
        time.time, time.monotonic, secrets.token_hex = saved
        random.setstate(saved_state)


def run_virtual[T](
    seed: int,
    main: Callable[[VirtualClock], Awaitable[T]],
    *,
    start: float = EPOCH,
    expected: tuple[type[BaseException], ...] = (),
) -> T:
    """Run `main` to its end on a fresh virtual loop and clock, in the world `seed` makes; a task
    that ends in one of the `expected` exceptions (a simulated kill) is not reported."""
    clock = VirtualClock(start)
    loop = VirtualEventLoop(clock)

    def report(loop: asyncio.AbstractEventLoop, context: dict[str, object]) -> None:
        if not isinstance(context.get("exception"), expected):
            loop.default_exception_handler(context)

    loop.set_exception_handler(report)
    try:
        with virtual_world(clock, seed):
            return loop.run_until_complete(_awaited(main(clock)))
    finally:
        loop.close()


async def _awaited[T](awaitable: Awaitable[T]) -> T:
    return await awaitable
