"""Line search with model-written patterns, bounded in CPU time and memory and never on the event loop.

Patterns come from models. Compiling is refused up front for patterns whose counted repeats would
expand past `MAX_PROGRAM_SIZE` (the `regex` engine unrolls `x{n}`, so `((a{100}){100}){100}` asks for
a million nodes); compiling and matching then run in a worker thread. A regular expression may
backtrack without end, so a regex search has `SEARCH_CPU_SECONDS` of the worker's CPU time in all,
after which it fails with `invalid_pattern`. CPU time, not the wall clock: on a busy machine a
correct search only takes longer (a 2 s wall-clock budget once refused a plain word over a 32 MiB
memory under load). A literal is matched in linear time and has no budget at all.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence

import regex
from a13n_harness.providers.memory import GrepMatch, MemoryStoreError

SEARCH_CPU_SECONDS = 2.0
MAX_PATTERN_CHARS = 4096
MAX_PROGRAM_SIZE = 20_000
_cpu_clock = time.thread_time  # the CPU time of the thread searching (tests replace it)
_REPEAT = regex.compile(r"\{(\d{0,9})(?:,(\d{0,9}))?\}")


async def search_files(
    pattern: str, *, is_regex: bool, case_sensitive: bool, files: Sequence[tuple[str, str, str]], limit: int
) -> tuple[list[GrepMatch], bool]:
    """Matching lines of `files` (path, text, version) in order, and whether more matched than `limit`."""
    check_pattern(pattern, is_regex=is_regex)
    return await asyncio.to_thread(_search, pattern, is_regex, case_sensitive, files, max(limit, 0))


def check_pattern(pattern: str, *, is_regex: bool) -> None:
    """`invalid_pattern` for a pattern refused before compiling: too long, or too large once unrolled."""
    if len(pattern) > MAX_PATTERN_CHARS:
        raise MemoryStoreError("invalid_pattern", f"A pattern has at most {MAX_PATTERN_CHARS} characters.")
    if is_regex and (size := program_size(pattern)) > MAX_PROGRAM_SIZE:
        raise MemoryStoreError(
            "invalid_pattern",
            f"The pattern's counted repeats expand to about {size} steps (at most {MAX_PROGRAM_SIZE}); "
            "use smaller counts or + and * instead of nested {n} repeats.",
        )


def compile_pattern(pattern: str, *, is_regex: bool, case_sensitive: bool) -> regex.Pattern[str]:
    """A checked pattern (`check_pattern`) compiled, or `invalid_pattern` saying why it is not one."""
    flags = regex.VERSION0 | (0 if case_sensitive else regex.IGNORECASE)
    try:
        return regex.compile(pattern if is_regex else regex.escape(pattern), flags)
    except (regex.error, RecursionError, OverflowError, ValueError) as error:
        raise MemoryStoreError("invalid_pattern", f"The pattern is not a valid regular expression: {error}.") from None


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
    pattern: str, is_regex: bool, case_sensitive: bool, files: Sequence[tuple[str, str, str]], limit: int
) -> tuple[list[GrepMatch], bool]:
    compiled = compile_pattern(pattern, is_regex=is_regex, case_sensitive=case_sensitive)
    budget = _CpuBudget(SEARCH_CPU_SECONDS) if is_regex else None
    matches: list[GrepMatch] = []
    for path, text, version in files:
        for number, line in enumerate(text.splitlines(), start=1):
            found = compiled.search(line) if budget is None else budget.search(compiled, line)
            if found:
                if len(matches) == limit:
                    return matches, True
                matches.append(GrepMatch(path=path, line=number, text=line, version=version))
    return matches, False


class _CpuBudget:
    """The CPU time one regex search may spend, across all its lines; `invalid_pattern` once spent."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.started = _cpu_clock()

    def search(self, compiled: regex.Pattern[str], line: str) -> bool:
        while (left := self.seconds - (_cpu_clock() - self.started)) > 0:
            try:
                # The engine's timeout is wall time: as long as the CPU time left, the most a call can
                # spend. A call cut off sooner in CPU (a busy machine shared the core) runs again.
                return compiled.search(line, concurrent=True, timeout=left) is not None
            except TimeoutError:
                continue
        raise MemoryStoreError(
            "invalid_pattern",
            f"The pattern took over {self.seconds:g} s of CPU time to match; simplify it (avoid nested "
            "repetition like (a|aa)+), search for a plain word, or search a smaller directory.",
        )
