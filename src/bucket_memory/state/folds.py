"""Which intents the memory's recent commits settled: the window in which an intent is folded once.

An intent (`fleet/intents.py`) names `base`, the head its author saw. A commit at seq S may settle it
only when `base < S <= base + FOLD_WINDOW` and no commit in between settled it: every writer
plans on the exact state at S - 1 (invariant 1 of `log`), which holds every intent settled in the
window, so no intent is ever applied twice, and one that no commit up to `base + FOLD_WINDOW`
settled never will be, which its author can prove by reading those commits (invariant 9 of `log`).
No clock decides.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from ..format.changes import Fold

# Commits after its base within which an intent may be settled. Authors race for the next key
# themselves after a few commits pass their intent by (`fleet/fleet.py`), so a live intent is settled
# within a few commits; the window only has to outlast a busy minute of losses.
FOLD_WINDOW = 32


def live(base: int, head: int) -> bool:
    """Whether an intent of `base` may still be settled after commit `head`: not past its window,
    and of a base a writer can have seen (one far beyond the log is garbage, never folded)."""
    return base - FOLD_WINDOW <= head < base + FOLD_WINDOW


@dataclass(frozen=True, slots=True)
class FoldWindow:
    """The intents settled by the commits up to `head` that a fold at `head + 1` must know of:
    each id with the seq that settled it, for the seqs after `head - FOLD_WINDOW`. Immutable: a
    state and the copies planned on it share one until a commit makes a new one."""

    head: int = 0
    settled: Mapping[str, int] = field(default_factory=lambda: MappingProxyType({}))

    @classmethod
    def of(cls, head: int, settled: Iterable[tuple[str, int]]) -> FoldWindow:
        """The window at `head` holding `settled` (a checkpoint's), refused when it is not one."""
        held = dict(settled)
        if any(not head - FOLD_WINDOW < seq <= head for seq in held.values()):
            raise ValueError(f"a fold window at {head} holds only the seqs after {head - FOLD_WINDOW}")
        return cls(head, MappingProxyType(held))

    def refusal(self, fold: Fold, seq: int) -> str | None:
        """Why commit `seq` (the next) may not settle `fold`'s intent, or None when it may."""
        if not fold.base < seq <= fold.base + FOLD_WINDOW:
            return f"it settles intent {fold.id} of base {fold.base}, outside its window"
        if fold.id in self.settled:
            return f"it settles intent {fold.id} again (commit {self.settled[fold.id]} did)"
        return None

    def foldable(self, intent_id: str, base: int, seq: int) -> bool:
        """Whether commit `seq` (the next) may settle the intent `intent_id` of `base`."""
        return base < seq <= base + FOLD_WINDOW and intent_id not in self.settled

    def after(self, seq: int, folds: Iterable[Fold]) -> FoldWindow:
        """The window once commit `seq` (the next), settling `folds`, is the head."""
        settled = {intent: at for intent, at in self.settled.items() if at > seq - FOLD_WINDOW}
        settled.update((fold.id, seq) for fold in folds)
        if not settled and not self.settled:
            return FoldWindow(seq, self.settled)
        return FoldWindow(seq, MappingProxyType(settled))

    def rows(self) -> tuple[tuple[str, int], ...]:
        """The settled intents as a checkpoint holds them: (id, seq), in id order."""
        return tuple(sorted(self.settled.items()))
