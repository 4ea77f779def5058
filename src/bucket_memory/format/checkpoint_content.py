"""What a checkpoint holds, in either layout (`codec.Checkpoint`, `packed.PackedCheckpoint`), and
that content with texts erased."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import NamedTuple


class CheckpointContent(NamedTuple):
    """What a checkpoint holds in either layout (`Checkpoint`, `packed.PackedCheckpoint`): the
    live files as (path, text or None once erased, version), in path order, and the rest as the
    fields of `Checkpoint` name them (`folds`: the intents settled in the last `folds.FOLD_WINDOW`
    commits, None when there are none)."""

    seq: int
    head_hash: str
    floor: int
    time: str
    files: Sequence[tuple[str, str | None, int]]
    deleted: Sequence[tuple[str, int]]
    genesis: str | None
    descriptions: Sequence[str | None] | None
    described_with: tuple[int, int, int] | None
    erased: Sequence[tuple[str, int]] | None
    folds: Sequence[tuple[str, int]] | None


def redacted_content(
    content: CheckpointContent, paths: Collection[str], erasure: int, remark: Collection[str] = ()
) -> CheckpointContent | None:
    """`content` with the texts and descriptions of the files at `paths` erased by commit `erasure`,
    and the erased files at `remark` marked erased by it, or None when that changes nothing."""
    erasing = {path for path, text, _ in content.files if path in paths and text is not None}
    remarking = {path for path, by in content.erased or () if path in remark and by != erasure}
    if not erasing and not remarking:
        return None
    files = tuple((path, None if path in erasing else text, seq) for path, text, seq in content.files)
    descriptions = content.descriptions and tuple(
        None if path in erasing else description
        for (path, _, _), description in zip(content.files, content.descriptions, strict=True)
    )
    erased = tuple(sorted({**dict(content.erased or ()), **dict.fromkeys(erasing | remarking, erasure)}.items()))
    return content._replace(files=files, descriptions=descriptions, erased=erased)
