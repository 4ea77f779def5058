"""The tombstone `bucket-memory destroy` leaves where a destroyed memory's commits were, and the
proof that makes it one.

Both hold no text, path or principal. Agents hold PutObject under the memory's prefix and so can
create a tombstone at the next log key; what makes it the end of the memory is the proof at
`PROOF_KEY`, under `erasures/`, which the agents' grants may not write (`policy.py`, the Terraform
modules) and which `destroy` creates before its first tombstone. A reader that meets a tombstone
(a warm store's probe of the next commit, a catch-up's listing) reads the proof once: there, the
memory is refused with `memory_deleted` instead of serving what it cached or writing after it;
absent, the tombstone is a forged commit (`FORGED`), corrupt as any other object a writer outside
the rules made: `verify` names it and `recover` removes it.
"""

from __future__ import annotations

from a13n_harness.providers.memory import MemoryStoreError

from .wire_values import ERASURES_PREFIX

DESTROYED = b'{"bucket-memory":"destroyed"}\n'
# Under erasures/, the operators' alone; no erasure record's key (`erasure_record_key`) has this form.
PROOF_KEY = f"{ERASURES_PREFIX}destroyed.json"
FORGED = (
    "a tombstone of `bucket-memory destroy` with no operator's proof of a destroy at "
    f"{PROOF_KEY}: a forgery by a writer with the agents' grants, which `bucket-memory recover` removes"
)


class MemoryDestroyed(MemoryStoreError):
    """`memory_deleted` from a tombstone with its proof: final, whatever a request before it did, so
    the commit path reports it as it is rather than as a write whose outcome is unknown."""


def destroyed(location: str) -> MemoryDestroyed:
    return MemoryDestroyed(
        "memory_deleted",
        f"{location} was destroyed (`bucket-memory destroy`): every version of its objects was deleted. "
        "Nothing was read or written. Drop this store; a new memory needs another prefix.",
    )
