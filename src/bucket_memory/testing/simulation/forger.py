"""The misbehaving agent: exactly the agent grants (GetObject, PutObject, DeleteObject and List
under the prefix; no version deletion), used against the memory.

Each forgery says whether it affects what readers serve (`Forgery.affects_state`): those `verify`
must name, and `recover` must repair without dropping an acknowledged write.
"""

from __future__ import annotations

import contextlib
import random
import time
from dataclasses import dataclass

from a13n_harness.providers.memory import MemoryStoreError, Origin

from ...files.store import LogFileStore
from ...format.changes import Change, Edit, Erase, Move, Write
from ...format.codec import Checkpoint, Commit
from ...format.wire_values import checkpoint_key, intent_key, log_key
from ...log.runs import Run
from ...objects.interface import CREATE, AlreadyExists, IfMatch, PreconditionFailed
from .bucket import SimBucket
from .world import OPERATOR, PATHS

MALLORY = Origin(principal_id="mallory")
FORGERIES = (
    "benign-commit",
    "void-commit",
    "void-edit",
    "erase-change",
    "garbage-intents",
    "foreign-intent",
    "forged-run",
    "forged-checkpoint",
    "delete-commit",
    "overwrite-commit",
)


@dataclass(frozen=True, slots=True)
class Forgery:
    """What the agent did: its kind, the keys it wrote or removed, and whether readers that trust
    those objects would serve another state (then `verify` must name one of `keys`)."""

    kind: str
    keys: tuple[str, ...]
    affects_state: bool
    detail: str = ""


class Forger:
    """The agent with PutObject, DeleteObject, GetObject and List under the prefix, and nothing more."""

    def __init__(self, bucket: SimBucket, reader: LogFileStore, draw: random.Random) -> None:
        self.bucket, self.reader, self.draw = bucket, reader, draw

    async def forge(self, kind: str) -> Forgery | None:
        """Do one forgery of `kind`; None when the memory gives it nothing to act on yet."""
        try:
            return await getattr(self, "_" + kind.replace("-", "_"))()  # type: ignore[no-any-return]
        except MemoryStoreError:
            return None  # the memory cannot be read now (an earlier forgery): nothing to forge on

    async def commit(self, *changes: Change, origin: Origin = MALLORY) -> Commit | None:
        """Create the next log key with a commit hashed and chained as a store would."""
        state = await self.reader.state(proven=True)
        commit = Commit.create(state.head + 1, state.head_hash, changes, origin, at=time.time())
        try:
            await self.bucket.put(log_key(commit.seq), commit.encode(), CREATE)
        except AlreadyExists:
            return None
        return commit

    async def overwrite(self, key: str, data: bytes) -> bool:
        """What PutObject does to a key that exists: a new current version over it."""
        current = [
            version for version in await self.bucket.list_versions(key) if version.key == key and version.current
        ]
        if not current:
            return False
        try:
            await self.bucket.put(key, data, IfMatch(current[0].tag))
        except PreconditionFailed:
            return False
        return True

    async def _files(self) -> dict[str, str]:
        state = await self.reader.state(proven=True)
        return {path: live.text for path, live in state.files.items() if live.erased is None}

    async def _benign_commit(self) -> Forgery | None:
        made = await self.commit(Write(path="mallory.md", text=f"mallory {self.draw.randrange(10**6)}\n"))
        return (
            None
            if made is None
            else Forgery("benign-commit", (log_key(made.seq),), False, "a well-formed agent commit")
        )

    async def _void_commit(self) -> Forgery | None:
        changes = (Write(path="payroll.md", text="Pay Mallory.\n"), Move(source="nope.md", destination="x.md"))
        made = await self.commit(*changes)
        return None if made is None else Forgery("void-commit", (log_key(made.seq),), False, "a move of a missing file")

    async def _void_edit(self) -> Forgery | None:
        files = await self._files()
        if not files:
            return None
        path = self.draw.choice(sorted(files))
        wrong = "not what the file holds"
        edit = Edit(path=path, at=0, removed=wrong, inserted="x", size=max(0, len(files[path]) - len(wrong) + 1))
        made = await self.commit(edit, Write(path="payroll.md", text="Pay Mallory, by an edit.\n"))
        return (
            None
            if made is None
            else Forgery("void-edit", (log_key(made.seq),), False, f"an edit of {path} that does not fit")
        )

    async def _erase_change(self) -> Forgery | None:
        files = await self._files()
        if not files:
            return None
        path = self.draw.choice(sorted(files))
        made = await self.commit(Erase(path=path), origin=OPERATOR)
        return (
            None
            if made is None
            else Forgery("erase-change", (log_key(made.seq),), True, f"erase {path} claiming the operator")
        )

    async def _garbage_intents(self) -> Forgery | None:
        head = (await self.reader.state(proven=True)).head
        count = self.draw.randint(1, 40)
        keys = tuple(intent_key(index, head, f"{index:032x}") for index in range(count))
        for key in keys:
            with contextlib.suppress(AlreadyExists):
                await self.bucket.put(key, b"garbage", CREATE)
        return Forgery("garbage-intents", keys, False, f"{count} objects of 7 bytes at intent keys")

    async def _foreign_intent(self) -> Forgery | None:
        head = (await self.reader.state(proven=True)).head
        key = intent_key(1, head, "f" * 32)
        with contextlib.suppress(AlreadyExists):
            await self.bucket.put(key, b'{"kind": "intent", "format": 1}', CREATE)
        return Forgery("foreign-intent", (key,), False, "an intent that does not decode")

    async def _forged_run(self) -> Forgery | None:
        state = await self.reader.state(proven=True)
        if state.head < 2:
            return None
        fake = Commit.create(state.head, state.head_hash, (Write(path="alice.md", text="ran\n"),), MALLORY, at=0)
        key = f"log/{state.head + 1:020d}.run.json"
        with contextlib.suppress(AlreadyExists):
            await self.bucket.put(key, Run.made([fake]).encode(), CREATE)
        return Forgery("forged-run", (key,), False, "a run whose commit is not the log's")

    async def _forged_checkpoint(self) -> Forgery | None:
        state = (await self.reader.state(proven=True)).copy()
        if not state.files:
            return None
        path = self.draw.choice(sorted(state.files))
        state.apply_change(Write(path=path, text="Pay Mallory $10000.\n"), state.head)
        key = checkpoint_key(state.head)
        content = Checkpoint.made(state.checkpoint_content(1000, at=time.time())).encode()
        try:
            await self.bucket.put(key, content, CREATE)
            landed = True
        except AlreadyExists:
            landed = await self.overwrite(key, content)
        return Forgery("forged-checkpoint", (key,), landed, f"{path} rewritten in a checkpoint") if landed else None

    async def _delete_commit(self) -> Forgery | None:
        commits = [info.key for info in await self.bucket.list("log/") if not info.key.endswith(".run.json")]
        if not commits:
            return None
        # The head: an older one may be what compaction would delete anyway, which no one can tell.
        await self.bucket.delete([commits[-1]])
        return Forgery("delete-commit", (commits[-1],), True, "the newest commit deleted")

    async def _overwrite_commit(self) -> Forgery | None:
        commits = [info.key for info in await self.bucket.list("log/") if not info.key.endswith(".run.json")]
        if not commits:
            return None
        key = self.draw.choice(commits)
        old = Commit.decode("sim", key, await self.bucket.get(key) or b"")
        path = self.draw.choice(PATHS)
        forged = Commit.create(old.seq, old.prev, (Write(path=path, text="overwritten by mallory\n"),), MALLORY, at=0)
        if not await self.overwrite(key, forged.encode()):
            return None
        return Forgery("overwrite-commit", (key,), True, f"commit {old.seq} rewritten to write {path}")
