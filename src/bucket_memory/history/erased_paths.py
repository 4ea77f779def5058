"""The paths the retained log's erasures name, as operator work keeps to them: no restore brings
back an erased version, a bulk write leaves those paths as they are, recovery finishes each erasure
again over what it put back, and verify names an object that holds an erased text again."""

from __future__ import annotations

from a13n_harness.providers.memory import MemoryStoreError, Origin

from ..files.store import LogFileStore
from .chain import History, Problem
from .erasure import Erasure
from .lineage import erasures_in


class ErasedPaths:
    """The erasures of one memory, read each time they are asked for (another process may erase
    meanwhile): those of the retained log, and those the operator's records under `erasures/` keep
    after compaction has removed their commits."""

    def __init__(self, store: LogFileStore, history: History) -> None:
        self.store = store
        self.history = history

    async def all(self) -> list[tuple[int, str]]:
        """Each path an erasure names, with the erasure's seq, oldest first."""
        commits = await self.history.commits()
        in_log = erasures_in(await self.history.applied(commits))
        oldest = commits[0].seq if commits else None
        recorded = [
            (record.seq, path)
            for record in await self.store.reader.erasures.all()
            # Where the log still holds the record's seq, its commit says (a record at a seq that
            # holds another commit is an attempt that lost it, left by an operator that died);
            # below the retained log, the record is all there is.
            if oldest is None or record.seq < oldest
            for path in record.paths
        ]
        # By seq alone: an erasure's paths keep the log's order, its erased path first (`_one_path_each`).
        return sorted(dict.fromkeys([*in_log, *recorded]), key=lambda erasure: erasure[0])

    async def names(self) -> frozenset[str]:
        """Every path an erasure in the retained log names."""
        return frozenset(path for _, path in await self.all())

    async def refuse_restoring(self, path: str, seq: int) -> None:
        """Refuse to restore `path` to its version at commit `seq` when an erasure of that path came
        after: its text is erased, or is being (an erase stopped part-way leaves it in objects not
        yet rewritten)."""
        erasures = [erasure for erasure, erased in await self.all() if erased == path]
        if erasures and seq < max(erasures):
            raise MemoryStoreError(
                "not_found",
                f"Version {seq} of {path} was erased by commit {max(erasures)}: its text is gone for good, "
                f"and no restore can bring it back. `bucket-memory log URL {path}` shows who erased it and when.",
            )

    async def erase_again(self, origin: Origin) -> None:
        """Finish every erasure the log holds again: what recovery put back was listed before some of
        them, perhaps (an erase that ran meanwhile in another process), and holds their texts."""
        # Not `all`: a writer whose cached head was a fork commit may land its next commit past the
        # restored chain meanwhile (the next recover re-applies it); that break must not keep the
        # erasures of the commits before it from being finished.
        for _, path in _one_path_each(erasures_in(await self.history.applied(await self.history.chained_commits()))):
            try:
                await Erasure(self.store).erase(path, origin=origin, finish_only=True)
            except MemoryStoreError as error:
                if error.code != "not_found":
                    raise  # not_found: nothing of the file is left anywhere, or the file at the path
                    # now was written after the erasure: recover never erases what no operator erased

    async def returned(self) -> list[Problem]:
        """Each object that holds a text an erasure erased (an erase stopped part-way, or an object
        put back since); none where the history cannot be read through (verify names why)."""
        try:
            erasures = await self.all()
        except MemoryStoreError:
            return []
        problems: list[Problem] = []
        for seq, path in _one_path_each(erasures):
            found = await Erasure(self.store).returned(path)
            # The newest erasure naming the path may be another's, which named it for its own file
            # moved there: then the path's files are not this erasure's (seed 528 with moves), and
            # that erasure is looked at by its own first path.
            if found is not None and found[0] == seq:
                erasure, keys = found
                said = f"holds a text of {path}, which commit {erasure} erased; run `bucket-memory erase` on it again"
                problems += [Problem(key, said) for key in keys]
        return problems


def _one_path_each(erasures: list[tuple[int, str]]) -> list[tuple[int, str]]:
    """Each erasure's seq and the first path it names: the path erased (committed first), whose
    files are the erasure's. Another of its names may have been another file's too (one moved to
    it), which going by that name would erase (seed 17 with moves); an erasure committed before
    the erased path came first names its paths sorted."""
    first: dict[int, str] = {}
    for seq, path in erasures:
        first.setdefault(seq, path)
    return list(first.items())
