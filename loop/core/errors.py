"""Errors a user can cause. Each carries where it came from so the CLI prints one line."""

from __future__ import annotations


class LoopError(Exception):
    """A user-caused error: bad sweep file, unknown layer, unreadable model.

    Rendered as ``file:line: field: message`` by :meth:`line`.
    """

    def __init__(
        self, message: str, *, file: str | None = None, line: int | None = None, field: str | None = None
    ) -> None:
        super().__init__(message)
        self.message = message
        self.file = file
        self.line = line
        self.field = field

    def where(self, file: str | None = None, line: int | None = None, field: str | None = None) -> LoopError:
        """Fill in location parts that are still unknown, keeping the innermost ones."""
        self.file = self.file or file
        self.line = self.line or line
        self.field = self.field or field
        return self

    def render(self) -> str:
        loc = ":".join(str(p) for p in (self.file, self.line) if p)
        parts = [p for p in (loc, self.field) if p]
        return ": ".join([*parts, self.message])

    def __str__(self) -> str:
        return self.render()


class BufferSizeError(ValueError):
    """A frame or output buffer whose size does not match the artifact's layout."""
