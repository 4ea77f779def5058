"""The files of the ledger: which acknowledged changes were made to one file, followed through moves.

A write made over version `e` of a path changed the file that version `e` was of; a move made over
version `e` of its source carried that file to its destination. Only acknowledged changes link
versions, so a file whose link was never acknowledged (a write or move whose answer was lost) is
two files here: the ledger's files are parts of the store's, never more.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .ledger import Ack

type Node = tuple[str, int]  # (path, version): a version of a file at a path


class Lineage:
    """The ledger's files as sets of (path, version) joined by acknowledged changes (a union-find).

    It answers every name a file had and every text acknowledged of the files that had a name
    before a commit: what `erase` of that name must remove (it erases each file that had it)."""

    def __init__(self, acks: Iterable[Ack], since: int = 0) -> None:
        self._parent: dict[Node, Node] = {}
        # A move at or below `since` is one the store no longer knows of (see `Ledger.follow_moves`):
        # neither its link nor its text at the destination counts.
        self._acks = [ack for ack in acks if ack.text is not None and (ack.source is None or ack.version > since)]
        for ack in self._acks:
            if ack.expected is not None:
                self._join((ack.source or ack.path, ack.expected), (ack.path, ack.version))
            else:
                self._root((ack.path, ack.version))

    def names(self, ack: Ack) -> set[str] | None:
        """Every name the file of `ack` was acknowledged at; None when its history is not the
        ledger's alone (a change was made over a version no acknowledged change made: an answer
        lost, or an operator's or recovery's commit), so its other names are unknown."""
        root = self._root((ack.path, ack.version))
        nodes = [node for node in self._parent if self._root(node) == root]
        made = {(each.path, each.version) for each in self._acks}
        return {path for path, _ in nodes} if all(node in made for node in nodes) else None

    def texts(self, path: str, below: int) -> set[str]:
        """The texts acknowledged below commit `below` of each file that had `path` as a name then."""
        roots = {self._root(node) for node in list(self._parent) if node[0] == path and node[1] < below}
        return {
            ack.text
            for ack in self._acks
            if ack.text is not None and ack.version < below and self._root((ack.path, ack.version)) in roots
        }

    def _root(self, node: Node) -> Node:
        parent = self._parent.setdefault(node, node)
        while parent != node:
            node, parent = parent, self._parent[parent]
        return node

    def _join(self, one: Node, other: Node) -> None:
        self._parent[self._root(one)] = self._root(other)
