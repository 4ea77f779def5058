"""The change feed: the cursor a memory issues at its head, and the paths changed after one.

A cursor is the head seq and, once the memory's genesis is known, the first 16 hex digits of its
hash, so that a cursor from another memory (or from before cursors named theirs) asks for a full
resync instead of naming the wrong changes."""

from __future__ import annotations

from .state import State

CURSOR_SEPARATOR = "~"


def cursor_of(state: State) -> str:
    """The change cursor at the head: its seq, and the memory's name when known."""
    if state.head == 0 or state.genesis is None:
        return str(state.head)
    return f"{state.head}{CURSOR_SEPARATOR}{state.genesis[:16]}"


def changes_since(state: State, since: int) -> tuple[str, ...] | None:
    """Paths changed after `since`, or None when the state cannot tell (a full resync)."""
    if since < state.floor or since > state.head:
        return None
    # Changes after the checkpoint a cold open read are all in `changed`: no need to order its own.
    recent = state.unsorted is not None and since >= state.unsorted.seq
    paths: list[str] = []
    for path, seq in reversed((state.changed if recent else state.changes_in_order()).items()):
        if seq <= since:
            break
        paths.append(path)
    return tuple(sorted(paths))


def changes_after(state: State, cursor: str) -> tuple[str, ...] | None:
    """Paths changed after a cursor this memory issued; None for one it did not (a full resync)."""
    seq_text, separator, name = cursor.partition(CURSOR_SEPARATOR)
    if not (seq_text.isascii() and seq_text.isdecimal() and len(seq_text) <= 20):
        return None
    seq = int(seq_text)
    if separator:
        if state.genesis is None or name != state.genesis[:16]:
            return None
    elif seq != 0 and state.genesis is not None:
        return None  # a bare seq names no memory: from another one, or from before cursors named theirs
    return changes_since(state, seq)
