"""Errors raised on bad input: each names the file, row and column it is about."""

from __future__ import annotations


class LarevError(Exception):
    """Base class of every error larev raises on purpose."""


class InputError(LarevError, ValueError):
    """Input that does not fit the data contract.

    The message names where the problem is: `file: row 12, column 'label': unknown label 'maybe' ...`.
    `row` is the 0-based row index in the file as read (after the header for CSV).
    """

    def __init__(self, problem: str, *, file: str | None = None, row: int | None = None,
                 column: str | None = None):
        self.problem = problem
        self.file = file
        self.row = row
        self.column = column
        super().__init__(self._format())

    def _format(self) -> str:
        where = []
        if self.row is not None:
            where.append(f"row {self.row}")
        if self.column is not None:
            where.append(f"column '{self.column}'")
        prefix = f"{self.file}: " if self.file else ""
        loc = ", ".join(where)
        return f"{prefix}{loc + ': ' if loc else ''}{self.problem}"


class ConfigError(LarevError, ValueError):
    """A configuration value that cannot work; the message says what to change."""


class ArtifactError(LarevError):
    """An artifact that is missing, incomplete or fails its checksum."""
