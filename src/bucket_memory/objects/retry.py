"""The one retry policy (full-jitter exponential backoff) and the one bounded-concurrency fetch."""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Awaitable, Callable, Iterable

from a13n_harness.providers.memory import MemoryStoreError

from ..runtime import deadline, telemetry
from .interface import Refused, TransientError

logger = logging.getLogger(__name__)

BASE_DELAY = 0.05
FETCH_CONCURRENCY = 16


def backoff(attempt: int, base: float = BASE_DELAY) -> float:
    """How long to wait before retry `attempt + 1`: a random part of a doubling window."""
    return random.uniform(0, base * 2 ** min(attempt, 16))


async def within_deadline[T](operation: Callable[[], Awaitable[T]], *, what: str) -> T:
    """One request, cut off when the operation's deadline passes (a cut-off counts as transient).

    Raises `DeadlineExceeded` when no time is left, before the request is sent.
    """
    left = deadline.budget(what)
    telemetry.count("requests")
    if left is None:
        answer = await operation()
    else:
        try:
            async with asyncio.timeout(left):
                answer = await operation()
        except TimeoutError:
            raise TransientError(f"{what}: no reply before the operation's deadline") from None
    if isinstance(answer, bytes):
        telemetry.count("bytes_read", len(answer))
    return answer


async def retrying[T](operation: Callable[[], Awaitable[T]], *, what: str, attempts: int = 6) -> T:
    """Run an idempotent request, retrying transient failures; `unavailable` once they are spent
    or the operation's deadline has passed. A `MemoryStoreError` or a put's `Refused` is an answer,
    raised as is (a `Refused` after a retry may be the first attempt's own write, landed).

    An exception the backend did not map counts as transient: it may pass, and if it does not,
    the caller still gets a `MemoryStoreError` with a message rather than a foreign traceback.
    """
    for number in range(attempts):
        try:
            return await within_deadline(operation, what=what)
        except (MemoryStoreError, Refused):
            raise
        except Exception as error:  # TransientError, or a failure nobody mapped
            if not isinstance(error, TransientError):
                logger.warning("%s: unmapped %s: %s", what, type(error).__name__, error)
            if number == attempts - 1:
                raise MemoryStoreError(
                    "unavailable", f"{what} failed {attempts} times ({error}); try again later."
                ) from None
            telemetry.count("retries")
            await asyncio.sleep(deadline.clip(backoff(number)))
    raise AssertionError("unreachable")


async def gather_bounded[T, R](
    items: Iterable[T], fetch: Callable[[T], Awaitable[R]], *, limit: int = FETCH_CONCURRENCY
) -> list[R]:
    """`fetch` of every item, at most `limit` at a time, results in the items' order.

    The first failure cancels the rest and is raised as itself, not inside an exception group.
    """
    semaphore = asyncio.Semaphore(limit)

    async def one(item: T) -> R:
        async with semaphore:
            return await fetch(item)

    try:
        async with asyncio.TaskGroup() as group:
            tasks = [group.create_task(one(item)) for item in items]
    except ExceptionGroup as failures:
        raise failures.exceptions[0] from None
    return [task.result() for task in tasks]
