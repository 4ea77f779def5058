"""Counting directories from a packed checkpoint's directory column, by bisection, against counting
them from every path: equal for any paths, and a column that misses, adds or repeats a directory
is told apart."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from bucket_memory.directories import directory_counts, files_below, names_every_directory, row_of

# Characters on either side of "/" in code point order ("." and "0"), so that a bisection that
# mistook a sibling for a child ("a.b", "a0" beside "a/") would miscount.
segments = st.text(alphabet="a.-0_é", min_size=1, max_size=3).filter(lambda segment: segment not in {".", ".."})
paths = st.lists(st.lists(segments, min_size=1, max_size=4).map("/".join), unique=True, max_size=40).map(sorted)


@given(paths)
def test_counting_by_bisection_counts_as_splitting_every_path(paths: list[str]) -> None:
    named = sorted(directory[:-1] for directory in directory_counts(paths))
    below = files_below(paths, named)
    assert below == directory_counts(paths)
    assert names_every_directory(paths, below)


@given(paths, st.data())
def test_a_column_missing_a_directory_or_naming_another_is_told_apart(paths: list[str], data: st.DataObject) -> None:
    named = sorted(directory[:-1] for directory in directory_counts(paths))
    if named:
        missing = data.draw(st.sampled_from(named))
        assert not names_every_directory(paths, files_below(paths, [name for name in named if name != missing]))
    other = data.draw(st.one_of(segments, st.sampled_from([*paths, "a/a/a/a/a"]) if paths else segments))
    if f"{other}/" not in directory_counts(paths):
        assert not names_every_directory(paths, files_below(paths, sorted({*named, other})))


@given(paths, st.one_of(segments, st.integers(), st.none()))
def test_a_row_is_found_for_each_path_and_for_nothing_else(paths: list[str], other: object) -> None:
    assert [row_of(paths, path) for path in paths] == list(range(len(paths)))
    assert row_of(paths, other) == (paths.index(other) if other in paths else None)
