"""Diffs are true (applying one to the old text gives the new) on any texts, and stay cheap on the
texts that made difflib run for minutes."""

from __future__ import annotations

import random
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bucket_memory import diffs
from bucket_memory.diffs import WORD_DIFF_MAX_LINE, LineDiff, Span, line_diff, unified_diff

_HUNK = re.compile(r"@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


def patched(before: str, diff: list[str]) -> str:
    """`before` with a unified diff applied, checking every context and removed line against it."""
    old = before.splitlines(keepends=True)
    new: list[str] = []
    at = 0  # lines of `old` consumed
    for line in diff[2:]:
        if hunk := _HUNK.match(line):
            start = int(hunk[1]) - (0 if hunk[2] == "0" else 1)
            new += old[at:start]
            at = start
        elif line[0] in " -":
            assert old[at] == line[1:], (old[at], line)
            at += 1
            if line[0] == " ":
                new.append(line[1:])
        else:
            assert line[0] == "+"
            new.append(line[1:])
    return "".join(new + old[at:])


lines = st.lists(st.sampled_from(["a\n", "b\n", "c\n", "\n", "a long line\n", "no newline"]), max_size=40)


@settings(max_examples=300)
@given(lines, lines)
def test_a_diff_applied_gives_the_new_text(before: list[str], after: list[str]) -> None:
    old, new = "".join(before), "".join(after)
    diff = unified_diff(old, new, "a", "b")
    assert (diff == []) == (old == new)
    if diff:
        assert diff[:2] == ["--- a\n", "+++ b\n"]
        assert patched(old, diff) == new


def test_the_pathological_pair_is_diffed_whole() -> None:
    """Two 64 KiB versions of short lines drawn from a few hundred values: every pair of equal lines
    is a candidate match for difflib."""
    chooser = random.Random(1)
    before = "".join(f"{chooser.randrange(190)}\n" for _ in range(20_000))
    after = "".join(f"{chooser.randrange(190)}\n" for _ in range(20_000))
    assert len(before) > 60_000
    assert patched(before, unified_diff(before, after, "a", "b")) == after


def rebuilt(before: str, diff: LineDiff) -> tuple[str, str]:
    """The old and the new text as `diff` shows them (line breaks as \\n), the unshown lines taken
    from `before`; checks that the line numbers run on through the shown and the skipped lines."""
    old_lines = before.splitlines()
    old: list[str] = []
    new: list[str] = []
    for hunk in diff.hunks:
        skipped = old_lines[len(old) : len(old) + hunk.skipped]
        old += [line + "\n" for line in skipped]
        new += [line + "\n" for line in skipped]
        for line in hunk.lines:
            text = "".join(span.text for span in line.spans) + ("\n" if line.newline else "")
            if line.kind != "added":
                assert line.old == len(old) + 1, (line, len(old))
                old.append(text)
            if line.kind != "removed":
                assert line.new == len(new) + 1, (line, len(new))
                new.append(text)
            assert (line.old is None) == (line.kind == "added") and (line.new is None) == (line.kind == "removed")
    rest = [line + "\n" for line in old_lines[len(old) :]]
    assert len(rest) == diff.skipped_after
    if rest and not before.endswith("\n"):
        rest[-1] = rest[-1][:-1]
    return "".join(old + rest), "".join(new + rest)


@settings(max_examples=300)
@given(lines, lines)
def test_a_line_diff_shows_both_texts_with_their_line_numbers(before: list[str], after: list[str]) -> None:
    old, new = "".join(before), "".join(after)
    diff = line_diff(old, new)
    assert (diff.hunks == ()) == (old == new)
    assert rebuilt(old, diff) == (old, new)
    shown = [line for hunk in diff.hunks for line in hunk.lines]
    assert diff.removed == sum(line.kind == "removed" for line in shown)
    assert diff.added == sum(line.kind == "added" for line in shown)
    for line in shown:
        assert line.kind != "same" or not any(span.changed for span in line.spans)


def changed(spans: tuple[Span, ...]) -> list[str]:
    return [span.text for span in spans if span.changed]


def test_a_changed_line_marks_the_words_that_changed() -> None:
    diff = line_diff("---\nship on monday, early\nend\n", "---\nship on friday, early\nend\n")
    (hunk,) = diff.hunks
    removed, added = (line for line in hunk.lines if line.kind != "same")
    assert (removed.old, removed.new, added.old, added.new) == (2, None, None, 2)
    assert changed(removed.spans) == ["monday"] and changed(added.spans) == ["friday"]
    assert "".join(span.text for span in added.spans) == "ship on friday, early"


def test_lines_added_or_removed_unpaired_are_not_marked_within() -> None:
    (hunk,) = line_diff("a\nb\n", "a\nb2\nnew line\n").hunks
    assert [(line.kind, changed(line.spans)) for line in hunk.lines] == [
        ("same", []),
        ("removed", ["b"]),
        ("added", ["b2"]),
        ("added", []),
    ]


def test_only_a_line_break_differs() -> None:
    (hunk,) = line_diff("last\n", "last").hunks
    assert [(line.kind, changed(line.spans), line.newline) for line in hunk.lines] == [
        ("removed", [], True),
        ("added", [], False),
    ]


def test_a_line_too_long_or_past_the_budget_is_marked_whole(monkeypatch: pytest.MonkeyPatch) -> None:
    long = "word " * (WORD_DIFF_MAX_LINE // 5 + 1)
    (hunk,) = line_diff(f"{long}a\n", f"{long}b\n").hunks
    assert [changed(line.spans) for line in hunk.lines] == [[f"{long}a"], [f"{long}b"]]
    # A pair of lines of five words (three and the spaces) costs 25 of the budget: the second finds it spent.
    monkeypatch.setattr(diffs, "WORD_DIFF_BUDGET", 25)
    (hunk,) = line_diff("one two x\none two y\n", "one two z\none two w\n").hunks
    assert [changed(line.spans) for line in hunk.lines] == [["x"], ["one two y"], ["z"], ["one two w"]]


def test_the_pathological_pair_is_shown_whole() -> None:
    chooser = random.Random(1)
    before = "".join(f"{chooser.randrange(190)}\n" for _ in range(20_000))
    after = "".join(f"{chooser.randrange(190)}\n" for _ in range(20_000))
    assert rebuilt(before, line_diff(before, after)) == (before, after)
