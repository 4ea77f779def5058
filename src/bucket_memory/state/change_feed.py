"""The change feed: the cursor a memory issues at its head, and the paths changed after one.

A cursor is the head seq and, once the memory's genesis is known, the first 16 hex digits of its
hash, so that a cursor from another memory (or from before cursors named theirs) asks for a full
resync instead of naming the wrong changes. With no path changed after the caller's cursor, the
answer is that cursor again: a commit that changes nothing (one that only settles refused
intents, a fence, a void commit) moves no cursor."""

from __future__ import annotations

from a13n_harness.providers.memory import Changes, FullResync

from .state import State

CURSOR_SEPARATOR = "~"


def cursor_of(state: State, seq: int | None = None) -> str:
    """The change cursor at `seq` (the head by default): its seq, and the memory's name when known."""
    seq = state.head if seq is None else seq
    if seq == 0 or state.genesis is None:
        return str(seq)
    return f"{seq}{CURSOR_SEPARATOR}{state.genesis[:16]}"


def feed(state: State, since: str | None) -> Changes | FullResync:
    """What the change feed answers on `state` to a caller at `since`: the paths changed after it
    with the head's cursor, or no path and the caller's cursor when none changed; a full resync
    at the head for no cursor or one the state cannot answer."""
    seq = cursor_seq(state, since) if since is not None else None
    paths = changes_since(state, seq) if seq is not None else None
    if paths is None:
        return FullResync(cursor=cursor_of(state))
    return Changes(cursor=cursor_of(state) if paths else cursor_of(state, seq), paths=paths)


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


def cursor_seq(state: State, cursor: str) -> int | None:
    """The seq a cursor this memory issued names; None for one it did not (a full resync)."""
    seq_text, separator, name = cursor.partition(CURSOR_SEPARATOR)
    if not (seq_text.isascii() and seq_text.isdecimal() and len(seq_text) <= 20):
        return None
    seq = int(seq_text)
    if separator:
        if state.genesis is None or name != state.genesis[:16]:
            return None
    elif seq != 0 and state.genesis is not None:
        return None  # a bare seq names no memory: from another one, or from before cursors named theirs
    return seq
