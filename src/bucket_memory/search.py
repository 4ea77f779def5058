"""Line search with model-written patterns, bounded in time and memory and never on the event loop.

Patterns come from models. Compiling is refused up front for patterns whose counted repeats would
expand past `MAX_PROGRAM_SIZE` (the `regex` engine unrolls `x{n}`, so `((a{100}){100}){100}` asks for
a million nodes); compiling and matching then run in a worker thread under one deadline for the
whole search, `SEARCH_SECONDS`, after which the search fails with `invalid_pattern`. The `regex`
engine releases the GIL while matching and takes a timeout per call, so no call outlives the deadline.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence

import regex
from a13n_harness.providers.memory import GrepMatch, MemoryStoreError

SEARCH_SECONDS = 2.0
MAX_PATTERN_CHARS = 4096
MAX_PROGRAM_SIZE = 20_000
_clock = time.monotonic  # the deadline's clock (tests replace it)
_REPEAT = regex.compile(r"\{(\d{0,9})(?:,(\d{0,9}))?\}")


async def search_files(
    pattern: str, *, is_regex: bool, case_sensitive: bool, files: Sequence[tuple[str, str, str]], limit: int
) -> tuple[list[GrepMatch], bool]:
    """Matching lines of `files` (path, text, version) in order, and whether more matched than `limit`."""
    if len(pattern) > MAX_PATTERN_CHARS:
        raise MemoryStoreError("invalid_pattern", f"A pattern has at most {MAX_PATTERN_CHARS} characters.")
    if is_regex and (size := program_size(pattern)) > MAX_PROGRAM_SIZE:
        raise MemoryStoreError(
            "invalid_pattern",
            f"The pattern's counted repeats expand to about {size} steps (at most {MAX_PROGRAM_SIZE}); "
            "use smaller counts or + and * instead of nested {n} repeats.",
        )
    deadline = _clock() + SEARCH_SECONDS
    return await asyncio.to_thread(_search, pattern, is_regex, case_sensitive, files, max(limit, 0), deadline)


def program_size(pattern: str) -> int:
    """An upper bound on the size of the pattern once its counted repeats are unrolled.

    Each atom counts one; a group counts its contents; `{m}` or `{m,n}` multiplies the atom or
    group before it by the larger count. Alternatives add up, which only overestimates.
    """
    totals = [0]
    last = 0
    index = 0
    while index < len(pattern):
        char = pattern[index]
        if char == "\\":
            index += 2
            if index <= len(pattern) and pattern[index - 1] in "pPNx" and pattern[index : index + 1] == "{":
                index = _closing(pattern, index, "}")
            last = 1
        elif char == "[":
            index = _class_end(pattern, index + 1)
            last = 1
        elif char == "(":
            totals.append(0)
            index += 1
            continue
        elif char == ")":
            last = max(totals.pop(), 1) if len(totals) > 1 else 1
            index += 1
        elif char == "{" and (repeat := _REPEAT.match(pattern, index)):
            counts = [int(count) for count in repeat.groups() if count]
            factor = max(counts, default=1)
            totals[-1] += last * (factor - 1)
            last *= factor
            index = repeat.end()
            continue
        else:
            last = 1
            index += 1
        totals[-1] += last
    return sum(totals)


def _closing(pattern: str, index: int, closer: str) -> int:
    end = pattern.find(closer, index)
    return len(pattern) if end < 0 else end + 1


def _class_end(pattern: str, index: int) -> int:
    """The index after a character class that opened before `index`."""
    if pattern[index : index + 1] == "^":
        index += 1
    if pattern[index : index + 1] == "]":
        index += 1
    while index < len(pattern):
        if pattern[index] == "\\":
            index += 2
            continue
        if pattern[index] == "]":
            return index + 1
        index += 1
    return index


def _search(
    pattern: str,
    is_regex: bool,
    case_sensitive: bool,
    files: Sequence[tuple[str, str, str]],
    limit: int,
    deadline: float,
) -> tuple[list[GrepMatch], bool]:
    flags = regex.VERSION0 | (0 if case_sensitive else regex.IGNORECASE)
    try:
        compiled = regex.compile(pattern if is_regex else regex.escape(pattern), flags)
    except (regex.error, RecursionError, OverflowError, ValueError) as error:
        raise MemoryStoreError("invalid_pattern", f"The pattern is not a valid regular expression: {error}.") from None
    matches: list[GrepMatch] = []
    try:
        for path, text, version in files:
            for number, line in enumerate(text.splitlines(), start=1):
                remaining = deadline - _clock()
                if remaining <= 0:
                    raise TimeoutError
                if compiled.search(line, concurrent=True, timeout=remaining):
                    if len(matches) == limit:
                        return matches, True
                    matches.append(GrepMatch(path=path, line=number, text=line, version=version))
    except TimeoutError:
        raise MemoryStoreError(
            "invalid_pattern",
            f"The search took over {SEARCH_SECONDS:g} s; simplify the pattern (avoid nested repetition like "
            "(a|aa)+) or search a smaller directory.",
        ) from None
    return matches, False
