"""Counting directories from a packed checkpoint's directory columns, by bisection, against
counting them from every path: equal for any paths, and columns that miss, add, repeat or
misplace a directory are refused, never counted wrong."""

from __future__ import annotations

import tracemalloc

from hypothesis import given
from hypothesis import strategies as st

from bucket_memory.format.directories import counted, directory_counts, located, names_a_file, row_of

# Characters on either side of "/" in code point order ("." and "0"), so that a bisection that
# mistook a sibling for a child ("a.b", "a0" beside "a/") would miscount.
segments = st.text(alphabet="a.-0_é", min_size=1, max_size=3).filter(lambda segment: segment not in {".", ".."})
paths = st.lists(st.lists(segments, min_size=1, max_size=4).map("/".join), unique=True, max_size=40).map(sorted)


@given(paths)
def test_counting_by_bisection_counts_as_splitting_every_path(paths: list[str]) -> None:
    assert counted(paths, *located(paths, directory_counts(paths))) == directory_counts(paths)


@given(paths, st.data())
def test_columns_no_writer_makes_are_refused(paths: list[str], data: st.DataObject) -> None:
    rows, lengths = located(paths, directory_counts(paths))
    pairs = list(zip(rows, lengths, strict=True))
    if pairs:
        missing = data.draw(st.sampled_from(pairs))
        kept = [pair for pair in pairs if pair != missing]
        assert counted(paths, [row for row, _ in kept], [length for _, length in kept]) is None
        assert counted(paths, [*rows, rows[-1]], [*lengths, lengths[-1]]) is None  # one named twice
        assert counted(paths, rows[::-1], lengths[::-1]) is None or len(pairs) == 1  # out of order
    assert counted(paths, rows, [*lengths, 1]) is None
    # Any columns at all: a cut of any path at any length, true directories among them.
    cuts = st.integers(-1, len(paths)).flatmap(
        lambda row: st.tuples(st.just(row), st.integers(-1, len(paths[row]) + 1 if 0 <= row < len(paths) else 2))
    )
    forged = data.draw(st.lists(st.one_of(cuts, st.sampled_from(pairs) if pairs else cuts), max_size=12))
    forged_rows, forged_lengths = [row for row, _ in forged], [length for _, length in forged]
    assert counted(paths, forged_rows, forged_lengths) in (None, directory_counts(paths))


def test_a_name_not_cut_at_a_slash_is_refused_where_the_counts_add_up() -> None:
    """ "a/x" counts no file below it, so the sum alone would take it beside "a/"."""
    assert counted(["a/x", "a/y"], [0, 0], [1, 2]) is None


@given(paths, st.one_of(segments, st.integers(), st.none()))
def test_a_row_is_found_for_each_path_and_for_nothing_else(paths: list[str], other: object) -> None:
    assert [row_of(paths, path) for path in paths] == list(range(len(paths)))
    assert row_of(paths, other) == (paths.index(other) if other in paths else None)


@given(paths)
def test_a_file_at_a_directorys_name_is_found_from_the_row_below_it(paths: list[str]) -> None:
    rows, lengths = located(paths, directory_counts(paths))
    for row, length in zip(rows, lengths, strict=True):
        name = paths[row][:length]
        assert names_a_file(paths, name, row) == (name in paths)


def test_forged_columns_naming_one_deep_directory_over_and_over_are_refused_before_they_are_all_made() -> None:
    """Each entry takes a few bytes of the index and would make a name of 4 KB: refused at the
    second, not after making them all (8 MB here; hundreds of MB from a small forged index)."""
    deep = ["a/" * 2000 + "f.md"]
    rows, lengths, more_than_slashes = [0] * 2000, [3999] * 2000, [0] * 100_000
    tracemalloc.start()
    try:
        assert counted(deep, rows, lengths) is None
        assert counted(deep, more_than_slashes, more_than_slashes) is None
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 1_000_000
