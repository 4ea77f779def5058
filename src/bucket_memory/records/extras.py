"""The optional dependencies record memory ranks with: a missing one is a message that says how to install it."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from a13n_harness.providers.memory import MemoryStoreError

from ..runtime.installing import install_hint

INSTALL = install_hint("records")
_RECORDS = frozenset({"numpy", "Stemmer"})


@contextmanager
def records_extra() -> Iterator[None]:
    """Run the body; an import of a module of the `records` extra that fails (`bucket-memory[s3]`
    alone lacks them) becomes `unavailable` naming the extra."""
    try:
        yield
    except ImportError as error:
        if error.name not in _RECORDS:
            raise
        raise MemoryStoreError(
            "unavailable", f"Record memory needs {error.name}, which this installation lacks: {INSTALL}"
        ) from None
