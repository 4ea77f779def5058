"""What the command line prints from a memory, made safe for the operator's terminal.

Any writer with PutObject (a prompt-injected agent among them) chooses the bytes of a record, a
path, a description, a principal or a message. Printed raw, an ESC sequence in one could move the
cursor up and erase the rows above it, set the clipboard (OSC 52) or hide text; a bidi override
could show a path reversed. Every such character is shown as its Python escape instead (\\x1b,
\\x9b, \\u202e): C0 controls but tab and (where lines are expected) newline, DEL, C1 controls, and the
bidi embeddings, overrides, isolates and marks. `cat` alone writes a file's text as it is.
"""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.text import Text

_BIDI = (0x061C, 0x200E, 0x200F, *range(0x202A, 0x202F), *range(0x2066, 0x206A))
_CONTROLS = (*range(0x00, 0x20), 0x7F, *range(0x80, 0xA0), *_BIDI)


def _escape(code: int) -> str:
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


_SHOWN = {code: _escape(code) for code in _CONTROLS if code not in (0x09, 0x0A)}
_SHOWN_ON_ONE_LINE = {code: _escape(code) for code in _CONTROLS}
# In JSON, the controls JSON itself leaves raw (C1, DEL, bidi) as \u escapes: the same strings to a
# parser, nothing a terminal acts on when a person reads the output.
_JSON_ESCAPED = {code: f"\\u{code:04x}" for code in (0x7F, *range(0x80, 0xA0), *_BIDI)}


def visible(text: str, *, one_line: bool = False) -> str:
    """`text` with every control character shown as its escape; tab and newline kept unless `one_line`."""
    return text.translate(_SHOWN_ON_ONE_LINE if one_line else _SHOWN)


def holds_controls(text: str) -> bool:
    """Whether `text` holds a character `visible` would escape (tab and newline aside)."""
    return visible(text) != text


def visible_json(document: str) -> str:
    """A JSON document with the control characters JSON leaves raw written as \\u escapes: the same
    value to a parser (outside strings JSON holds none of them)."""
    return document.translate(_JSON_ESCAPED)


class VisibleConsole(Console):
    """A rich console that shows control characters in what it prints, as `visible` does: plain
    strings and table cells through `render_str`, `Text` values through `print` (their style kept).
    The escapes rich itself writes for colours and styles are untouched. A closed pipe is raised as
    BrokenPipeError (rich would exit 1, which here means "found nothing"), for main() to end with 141."""

    def render_str(self, text: str, **options: Any) -> Text:
        return super().render_str(visible(text), **options)

    def print(self, *objects: Any, **options: Any) -> None:
        shown = [
            Text(visible(item.plain), style=item.style, end=item.end) if isinstance(item, Text) else item
            for item in objects
        ]
        super().print(*shown, **options)

    def on_broken_pipe(self) -> None:
        self.quiet = True
        raise BrokenPipeError
