"""Diffs are true (applying one to the old text gives the new) on any texts, and stay cheap on the
texts that made difflib run for minutes."""

from __future__ import annotations

import random
import re

from hypothesis import given, settings
from hypothesis import strategies as st

from bucket_memory.diffs import unified_diff

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
