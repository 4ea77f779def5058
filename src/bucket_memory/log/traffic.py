"""How fast other writers grow the log, as this process saw it: whether the next write meets others.

A write whose head is current lands with one PUT; one whose head is stale loses its first PUT,
and in a fleet every head is stale by the time its process writes again. The commits other
processes made, with the times they carry, tell how many to expect since the head was last
proven: a fleet (`fleet/fleet.py`) publishes an intent instead of racing when that is half a
commit or more.
"""

from __future__ import annotations

import time
from collections import deque

# Others' commits remembered: enough for a rate, few enough to follow a change of pace.
_REMEMBERED = 16
# Others' commits older than this (server time) say nothing about now.
QUIET_AFTER = 30.0


class Traffic:
    """The times (server clock) of the last commits other processes made, and the rate they give.

    Only `note` changes it, for each commit of another process the head applies; a rate needs
    two. A process that has seen no other writer, or none lately, expects none."""

    def __init__(self) -> None:
        self._moments: deque[float] = deque(maxlen=_REMEMBERED)
        self.lost_at = float("-inf")  # when (local clock) a create of ours last lost to another writer's

    def note(self, moment: float) -> None:
        """Another process's commit, made at `moment` (seconds since the epoch, server time)."""
        self._moments.append(moment)

    @property
    def shared(self) -> bool:
        """Whether another process has committed lately, as far as this one has seen (by the
        local clock's idea of now: a rough test for whether runs are worth writing)."""
        return bool(self._moments) and time.time() - self._moments[-1] <= QUIET_AFTER

    def rate(self, now: float) -> float:
        """Others' commits per second, as of `now` (server time); 0 when quiet."""
        moments = sorted(self._moments)
        if len(moments) < 2 or now - moments[-1] > QUIET_AFTER:
            return 0.0
        span = moments[-1] - moments[0]
        # Commit times have milliseconds: a burst within one is as fast as a millisecond apart each.
        return (len(moments) - 1) / max(span, 0.001 * (len(moments) - 1))

    def expected(self, now: float, elapsed: float) -> float:
        """Commits others likely made in the `elapsed` seconds up to `now` (server time)."""
        return self.rate(now) * elapsed
