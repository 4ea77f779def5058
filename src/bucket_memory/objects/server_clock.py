"""The server's clock as the Date header of its replies tells it (the clouds' backends keep one)."""

from __future__ import annotations

import time
from email.utils import parsedate_to_datetime


class ServerClock:
    """The server's clock, which compaction ages objects by, kept from the Date header of replies.

    The header has whole seconds, so an offset within two seconds is noise and taken as none.
    """

    def __init__(self) -> None:
        self.offset = 0.0

    def note(self, date: str | None) -> None:
        if not date:
            return
        try:
            offset = parsedate_to_datetime(date).timestamp() - time.time()
        except (TypeError, ValueError, IndexError, OverflowError):
            return
        self.offset = offset if abs(offset) > 2.0 else 0.0

    def now(self) -> float:
        return time.time() + self.offset
