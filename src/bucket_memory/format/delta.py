"""Edits: a write of a file that exists, stored as the one span of text it changes.

An append to a 60 KiB file stores its few new characters instead of the whole text. The span is
the text between the longest common prefix and the longest common suffix of the old and new
text, in code points; the edit records what it removed as well as what it inserted, so that a
reader checks it against the text it applies to and can undo it.
"""

from __future__ import annotations

from .changes import Change, Edit, Write
from .wire_values import stored_size

# Bytes an edit's fields take beyond a write's (`at`, `removed`, `size`, the longer op name).
_EDIT_OVERHEAD = 48


def stored_form(change: Change, old: str | None) -> Change:
    """`change` as a commit carries it: a write over `old` (the file's text, None if it has none)
    becomes an edit when that is smaller."""
    if not isinstance(change, Write) or old is None or change.text is None:
        return change
    at, removed, inserted = splice(old, change.text)
    if not worth_it(stored_size(removed) + stored_size(inserted), stored_size(change.text)):
        return change
    return Edit(
        path=change.path,
        at=at,
        removed=removed,
        inserted=inserted,
        size=len(change.text.encode()),
        origin=change.origin,
    )


def splice(old: str, new: str) -> tuple[int, str, str]:
    """(at, removed, inserted) such that `old[:at] + inserted + old[at + len(removed):] == new`,
    with the shortest span."""
    at = _common_prefix(old, new)
    # The suffix may not reach into the prefix of either text.
    tail = _common_prefix(old[at:][::-1], new[at:][::-1])
    return at, old[at : len(old) - tail], new[at : len(new) - tail]


def spliced(old: str, at: int, removed: str, inserted: str) -> str | None:
    """`old` with `removed` at `at` replaced by `inserted`, or None when `old` does not hold
    `removed` there (the edit was made against another text)."""
    end = at + len(removed)
    if end > len(old) or old[at:end] != removed:
        return None
    return old[:at] + inserted + old[end:]


def worth_it(span_bytes: int, whole_bytes: int) -> bool:
    """Whether an edit whose removed and inserted text take `span_bytes` is smaller than writing
    the whole text."""
    return span_bytes + _EDIT_OVERHEAD < whole_bytes


def _common_prefix(one: str, other: str) -> int:
    # A binary search over slice comparisons, which run in C: about 30 comparisons for 1 MiB,
    # against a million steps of a Python loop.
    low, high = 0, min(len(one), len(other))
    while low < high:
        middle = (low + high + 1) // 2
        if one[:middle] == other[:middle]:
            low = middle
        else:
            high = middle - 1
    return low
