"""The simulated bucket: versioned objects on the run's virtual clock, with what the auditors see of it.

Every process of the run (writers, the operator, the misbehaving agent) reaches this one bucket,
each through its own `MortalObjects`: seeded faults of the kinds `FaultyObjectStore` injects, and
a kill at any request, after which that process sends nothing more (a process killed with -9).
"""

from __future__ import annotations

import json
import random
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import replace

from ..faults import Fault, Faults, FaultyObjectStore, Operation, SimulatedCrash, _Request
from ..versioned import VersionedMemoryObjectStore
from .virtual_time import VirtualClock


class SimBucket(VersionedMemoryObjectStore):
    """A versioned in-memory bucket whose server clock is the run's virtual clock, counting GETs per
    key (what an object costs the fleet to read)."""

    def __init__(self, clock: VirtualClock) -> None:
        self._virtual = clock
        super().__init__("sim")
        self.gets: Counter[str] = Counter()

    @property
    def clock(self) -> float:
        return self._virtual.now

    @clock.setter
    def clock(self, _: float) -> None:
        """The base class sets its clock at start; the run's clock is the only one here."""

    async def get(self, key: str) -> bytes | None:
        self.gets[key] += 1
        return await super().get(key)

    def every_stored_bytes(self) -> Iterator[tuple[str, str, bytes]]:
        """(key, where, bytes) for every current object and every stored version, delete markers aside."""
        for key, (data, _) in self.objects.items():
            yield key, "current object", data
        for key, versions in self.stored.items():
            for version, stored, _ in versions:
                if stored is not None:
                    yield key, f"stored version {version}", stored


class MortalObjects(FaultyObjectStore):
    """One process's view of the bucket: seeded faults, and a kill at a drawn request (before or after
    it reaches the bucket) after which every request of this process raises `SimulatedCrash`."""

    def __init__(self, inner: SimBucket, faults: Faults, *, seed: int, kill_chance: float) -> None:
        self._kills = random.Random(f"kill-{seed}")
        self.kill_chance = kill_chance
        self.dead = False
        super().__init__(inner, replace(faults, script=self._script), seed=seed)

    def _script(self, operation: Operation, key: str, count: int) -> Fault | None:
        if self.kill_chance and self._kills.random() < self.kill_chance:
            self.dead = True
            return self._kills.choice(["crash_before", "crash_after"])
        return None

    async def _before(self, operation: Operation, key: str) -> _Request:
        if self.dead:
            raise SimulatedCrash(f"this process was killed; it sends no {operation} {key}")
        return await super()._before(operation, key)


def keys_holding(bucket: SimBucket, needles: Sequence[str]) -> list[str]:
    """Where any of `needles` is held, as 'key (where)', over current objects and stored versions."""
    # Objects are JSON: a text is stored escaped ("\\n" for a newline), or raw in a packed checkpoint.
    encoded = [(needle, (needle.encode(), json.dumps(needle)[1:-1].encode())) for needle in needles]
    return [
        f"{key} ({where}) holds {needle!r}"
        for key, where, data in bucket.every_stored_bytes()
        for needle, forms in encoded
        if any(form in data for form in forms)
    ]
