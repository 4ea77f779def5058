"""Whether stored bytes hold a text of a file being erased, read as hostile (`erasure.py`)."""

from __future__ import annotations

from ..fleet.intents import read_intent
from ..format.canonical_json import canonical
from ..format.codec import Commit
from ..format.packed import decode_checkpoint
from ..format.signed import CorruptObjectError
from ..format.wire_values import CHECKPOINT_PREFIX, LOG_PREFIX


def an_intent(key: str, data: bytes) -> bool:
    """Whether an object under `pending/` is an intent a writer could have made."""
    try:
        read_intent("erase", key, data)
    except CorruptObjectError:
        return False
    return True


def holds_any(data: bytes, names: set[str]) -> bool:
    """Whether bytes (a half-written stage, perhaps) spell one of `names` as a JSON string."""
    return any(canonical(name)[1:-1] in data for name in names)


def holds_names(data: bytes, key: str, names: set[str]) -> bool:
    """Whether a stored object (read as hostile) writes a text at one of `names`; one that does not
    decode counts where its bytes spell one of them as a JSON string."""
    try:
        if key.startswith(LOG_PREFIX):
            commit = Commit.decode("erase", key, data)
            return any(
                getattr(change, "path", None) in names and not getattr(change, "is_erased", True)
                for change in commit.changes
            )
        if key.startswith(CHECKPOINT_PREFIX):
            content = decode_checkpoint("erase", key, data).content()
            return any(path in names and text is not None for path, text, _ in content.files)
    except CorruptObjectError:
        return holds_any(data, names)
    return holds_any(data, names)  # a run or an intent: copies, deleted wherever a name is spelt
