"""The simulated world: one bucket, the processes that reach it, and the ledger of what they were told."""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from a13n_harness.providers.memory import Origin

from ...files.store import LogFileStore
from ...log.options import LogOptions
from ..faults import Faults
from .bucket import MortalObjects, SimBucket
from .ledger import Ledger
from .virtual_time import VirtualClock

PATHS = ("alice.md", "payroll.md", "contract.md", "notes/a.md", "notes/b.md")
OPERATOR = Origin(principal_id="operator", run_id="bucket-memory simulation")
# Faults on every request of every process, of the kinds the store already survives in tests/test_faults.py.
FAULTS = Faults(
    fail_before=0.02,
    lose_reply=0.03,
    resend=0.02,
    refuse=0.02,
    unmapped=0.005,
    latency=0.02,
    latency_sigma=0.5,
    max_delay=0.01,
)


@dataclass(frozen=True, slots=True)
class Settings:
    """The shape of one run: how many fleet writers, steps, the faults and kill chance per request,
    whether the misbehaving agent acts, and how often writers move files."""

    writers: int = 3
    steps: int = 40
    faults: Faults = FAULTS
    kill_chance: float = 0.003
    forgeries: bool = True
    moves: float = 0.0  # the chance a writer's change of an existing file is a move to a free path


def log_options(clock: VirtualClock) -> LogOptions:
    """Small retention so that compaction and checkpoints happen within a few steps."""
    return LogOptions(
        retain_commits=2,
        retain_seconds=0,
        grace_period=30,
        checkpoint_min_commits=2,
        checkpoint_max_commits=4,
        clock=clock,
    )


@dataclass
class Process:
    """One process on the bucket: its store, and its view of the bucket (faults, and its death)."""

    name: str
    objects: MortalObjects
    store: LogFileStore

    @property
    def alive(self) -> bool:
        return not self.objects.dead


@dataclass
class World:
    """Everything a run acts on: the clock, the bucket, the fleet writers (one of them group-commits),
    the operator's process, the schedule's random draws and the ledger."""

    seed: int
    settings: Settings
    clock: VirtualClock
    bucket: SimBucket
    schedule: random.Random
    ledger: Ledger = field(default_factory=Ledger)
    writers: list[Process] = field(default_factory=list)
    operator: Process | None = None
    births: int = 0
    faulty: bool = True

    @classmethod
    def made(cls, seed: int, settings: Settings, clock: VirtualClock) -> World:
        world = cls(seed, settings, clock, SimBucket(clock), random.Random(f"schedule-{seed}"))
        world.ledger.moving = settings.moves > 0
        world.writers = [world.born(f"w{index}") for index in range(settings.writers)]
        world.operator = world.born("op")
        return world

    def born(self, name: str) -> Process:
        """A new process (a cold start): its own seeded faults and kill draws."""
        self.births += 1
        faults = self.settings.faults if self.faulty else Faults()
        kill = self.settings.kill_chance if self.faulty else 0.0
        objects = MortalObjects(self.bucket, faults, seed=self.seed * 1000 + self.births, kill_chance=kill)
        return Process(name, objects, LogFileStore(objects, options=log_options(self.clock)))

    def revive(self, step: int) -> None:
        """Start again every process that was killed, as a supervisor restarts one."""
        for index, process in enumerate(self.writers):
            if not process.alive:
                self.ledger.note(step, f"{process.name} was killed; restarted cold")
                self.writers[index] = self.born(process.name)
        if self.operator is None or not self.operator.alive:
            self.operator = self.born("op")

    def cold(self) -> LogFileStore:
        """A fresh reader without faults: what a new process reads now."""
        return LogFileStore(self.bucket, options=log_options(self.clock))
