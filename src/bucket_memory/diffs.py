"""Line diffs of two versions of a file, bounded in time and memory whatever the texts hold.

`difflib` ran for minutes on two versions of a 64 KiB file of short repeating lines (its matcher
looks for the longest match among every pair of equal lines). A patience diff anchors on lines
that occur once in each version and gives up on regions without such anchors, so its cost stays
near linear in the lines (measured beside difflib: docs/performance.md, "Numbers behind the code").
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from typing import Literal

import patiencediff


def unified_diff(before: str, after: str, from_label: str, to_label: str) -> list[str]:
    """The lines of a unified diff from `before` to `after` (each keeping its line end)."""
    return list(
        patiencediff.unified_diff(
            before.splitlines(keepends=True),
            after.splitlines(keepends=True),
            from_label,
            to_label,
            sequencematcher=patiencediff.PatienceSequenceMatcher,
        )
    )


# A changed line paired with the line that replaced it is compared word by word (difflib on two short
# lines: quadratic in their words at worst), unless either is longer than this: then it is marked
# whole. The words compared in one diff are bounded too (the products of the two lines' word counts,
# about 0.1 s of the worst-case pairs at most); past the budget, changed lines are marked whole.
WORD_DIFF_MAX_LINE = 400
WORD_DIFF_BUDGET = 400_000
_WORD = re.compile(r"\w+|\s+|[^\w\s]")

type LineKind = Literal["same", "removed", "added"]


@dataclass(frozen=True, slots=True)
class Span:
    """Part of a line; `changed` marks what a removed line lost or an added line gained."""

    text: str
    changed: bool


@dataclass(frozen=True, slots=True)
class Line:
    """A line of a diff with its numbers in the old and the new text (1-based; None where it is not in
    that text), its text (without its line break) in spans, and whether it ends with a line break."""

    kind: LineKind
    old: int | None
    new: int | None
    spans: tuple[Span, ...]
    newline: bool


@dataclass(frozen=True, slots=True)
class Hunk:
    """Changed lines with their context, after `skipped` unchanged lines that are not shown."""

    skipped: int
    lines: tuple[Line, ...]


@dataclass(frozen=True, slots=True)
class LineDiff:
    """A diff to show: its hunks, the unchanged lines after the last, and the lines removed and added."""

    hunks: tuple[Hunk, ...]
    skipped_after: int
    removed: int
    added: int


def line_diff(before: str, after: str, context: int = 3) -> LineDiff:
    """The diff from `before` to `after` by the same patience diff as `unified_diff`, with line
    numbers, and with the words that changed marked within each removed line paired with an added one."""
    old, new = before.splitlines(keepends=True), after.splitlines(keepends=True)
    matcher = patiencediff.PatienceSequenceMatcher(None, old, new)
    budget = WordBudget(WORD_DIFF_BUDGET)
    hunks: list[Hunk] = []
    shown_to = 0  # old lines up to the end of the last hunk
    removed = added = 0
    for group in matcher.get_grouped_opcodes(context):
        lines: list[Line] = []
        for tag, i1, i2, j1, j2 in group:
            if tag == "equal":
                lines += [_line("same", old[i], i + 1, j1 + i - i1 + 1) for i in range(i1, i2)]
                continue
            gone, came = old[i1:i2], new[j1:j2]
            pairs = [budget.words(a, b) for a, b in zip(gone, came, strict=False)]
            lines += [
                _line("removed", text, i1 + k + 1, None, pairs[k][0] if k < len(pairs) else None)
                for k, text in enumerate(gone)
            ]
            lines += [
                _line("added", text, None, j1 + k + 1, pairs[k][1] if k < len(pairs) else None)
                for k, text in enumerate(came)
            ]
            removed, added = removed + len(gone), added + len(came)
        hunks.append(Hunk(group[0][1] - shown_to, tuple(lines)))
        shown_to = group[-1][2]
    return LineDiff(tuple(hunks), len(old) - shown_to, removed, added)


def _line(kind: LineKind, text: str, old: int | None, new: int | None, spans: tuple[Span, ...] | None = None) -> Line:
    body = _body(text)
    return Line(kind, old, new, (Span(body, False),) if spans is None else spans, len(body) < len(text))


def _body(line: str) -> str:
    """A line without its line break (any that str.splitlines splits at)."""
    return line.splitlines()[0] if line else ""


class WordBudget:
    """Compares paired lines word by word while the budget lasts."""

    def __init__(self, budget: int) -> None:
        self.left = budget

    def words(self, removed: str, added: str) -> tuple[tuple[Span, ...], tuple[Span, ...]]:
        """The spans of a removed line and the added line that replaced it, the words that differ
        marked; each line marked whole when it is too long or the budget is spent."""
        a, b = _body(removed), _body(added)
        if a == b:  # only the line break differs
            return (Span(a, False),), (Span(b, False),)
        first, second = _WORD.findall(a), _WORD.findall(b)
        cost = len(first) * len(second)
        if max(len(a), len(b)) > WORD_DIFF_MAX_LINE or cost > self.left:
            return (Span(a, True),), (Span(b, True),)
        self.left -= cost
        old: list[Span] = []
        new: list[Span] = []
        for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, first, second, autojunk=False).get_opcodes():
            _append(old, "".join(first[i1:i2]), tag != "equal")
            _append(new, "".join(second[j1:j2]), tag != "equal")
        return tuple(old), tuple(new)


def _append(spans: list[Span], text: str, changed: bool) -> None:
    """Add `text` to `spans`, joined to the last span when both are changed or both unchanged."""
    if not text:
        return
    if spans and spans[-1].changed == changed:
        spans[-1] = Span(spans[-1].text + text, changed)
    else:
        spans.append(Span(text, changed))
