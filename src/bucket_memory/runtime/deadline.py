"""The total time one operation may take, across all its requests and retries.

An operation (a read, a commit) runs inside `within(seconds)`; every request it sends is cut off
when the time is up (`retry.within_deadline`), no retry waits past the end (`clip`), and a request
that would start after it raises `DeadlineExceeded` instead. The deadline lives in a context
variable, so tasks an operation starts inherit it and concurrent operations each keep their own.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from contextvars import ContextVar

from a13n_harness.providers.memory import MemoryStoreError

_deadline: ContextVar[float | None] = ContextVar("bucket_memory_deadline", default=None)


class DeadlineExceeded(MemoryStoreError):
    """The operation ran out of time before it could send another request; nothing more was sent."""

    def __init__(self, what: str) -> None:
        super().__init__(
            "unavailable",
            f"{what} did not finish within its deadline (LogOptions.operation_timeout); the service is slow "
            "or unreachable. Try again later.",
        )


def check_seconds(name: str, value: object) -> float:
    """`value` as a timeout: a positive, finite number of seconds, or a ValueError naming `name`."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value < float("inf"):
        raise ValueError(f"{name} must be a positive number of seconds, not {value!r}")
    return float(value)


def end_after(seconds: float) -> float:
    """The moment `seconds` from now, or the current operation's end when that comes first."""
    current = _deadline.get()
    moment = time.monotonic() + seconds
    return moment if current is None else min(current, moment)


@contextmanager
def until(moment: float) -> Iterator[None]:
    """Run the body with its requests bounded to end by `moment` (time.monotonic)."""
    token = _deadline.set(moment)
    try:
        yield
    finally:
        _deadline.reset(token)


def within(seconds: float) -> AbstractContextManager[None]:
    """Run the body with at most `seconds` for everything it sends (less inside a shorter deadline)."""
    return until(end_after(seconds))


def remaining() -> float | None:
    """Seconds left to the current operation's deadline (None: there is none)."""
    current = _deadline.get()
    return None if current is None else current - time.monotonic()


def budget(what: str) -> float | None:
    """How long the next request may take (None: as long as its own timeout allows).

    Raises `DeadlineExceeded` when nothing is left, before anything is sent.
    """
    left = remaining()
    if left is not None and left <= 0:
        raise DeadlineExceeded(what)
    return left


def clip(delay: float) -> float:
    """A wait shortened so that it ends by the deadline (the next request then raises)."""
    left = remaining()
    return delay if left is None else max(0.0, min(delay, left))
