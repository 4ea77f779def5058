"""A file as of one commit: what a state holds for each live path."""

from __future__ import annotations

from ..format.packed import PackedTexts


class LiveFile:
    """A file as of one commit. `erased` is the erasure commit of a file whose text was erased
    (its text is then empty): only past states hold one, since the erasure deletes the file.
    A file read from a packed checkpoint reads its text from there when first asked for it."""

    __slots__ = ("_packed_at", "_text", "_texts", "description", "erased", "size", "stored", "version")

    def __init__(
        self,
        text: str | None,
        version: int,
        size: int,  # of the UTF-8 text
        stored: int,  # in commits and checkpoints, which the quota counts
        description: str | None,
        erased: int | None = None,
        texts: PackedTexts | None = None,  # where to read the text from when `text` is None
        packed_at: int = 0,
    ) -> None:
        self._text, self._texts, self._packed_at = text, texts, packed_at
        self.version, self.size, self.stored = version, size, stored
        self.description, self.erased = description, erased

    @property
    def text(self) -> str:
        """Its text, or `CorruptObjectError` if the packed checkpoint it is read from is corrupt."""
        text, texts = self._text, self._texts
        if text is None:
            if texts is None:  # another thread read it between the two loads above
                assert self._text is not None
                return self._text
            text = self._text = texts.text(self._packed_at, self.stored, self.size)
            self._texts = None  # so that the checkpoint's bytes go once no file reads from them
        return text

    def moved(self, version: int) -> LiveFile:
        """This file at another path, made by commit `version`: its text still unread if it was."""
        return LiveFile(
            self._text, version, self.size, self.stored, self.description, self.erased, self._texts, self._packed_at
        )

    def __repr__(self) -> str:
        return f"LiveFile(version={self.version}, size={self.size}, erased={self.erased})"
