"""One table, three renderings: rich (terminal), Markdown (CI summaries, pull requests), and rows for JSON.

Reports build `Grid` values and `Line` values once; ``--format text|markdown|json`` only picks the
renderer. `make_console` gives the terminal a rich console and a pipe one that never cuts a
table at 80 columns (a CI log keeps every digit).
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from typing import IO, Any, Optional, Sequence

__all__ = ["FORMATS", "Grid", "Line", "make_console", "markdown"]

FORMATS = ("text", "markdown", "json")
"""What ``--format`` takes."""

PIPE_WIDTH = 1000
"""Console width when the output is not a terminal: wide enough that no table wraps or cuts a figure."""


@dataclass
class Grid:
    """A titled table: headers, rows of text, and which columns are right-aligned."""

    title: str
    headers: Sequence[str]
    rows: list[Sequence[str]] = field(default_factory=list)
    right: frozenset[int] = frozenset()
    caption: str = ""

    def rich(self) -> Any:
        """A `rich.table.Table`."""
        from rich.table import Table

        table = Table(title=self.title, title_justify="left", caption=self.caption or None, caption_justify="left")
        for i, h in enumerate(self.headers):
            table.add_column(h, justify="right" if i in self.right else "left")
        for row in self.rows:
            table.add_row(*row)
        return table

    def markdown(self) -> str:
        """A GitHub-flavoured Markdown table under a bold title."""

        def cell(text: str) -> str:
            return text.replace("|", "\\|").replace("\n", " ")

        head = "| " + " | ".join(cell(h) for h in self.headers) + " |"
        rule = "|" + "|".join("---:" if i in self.right else "---" for i in range(len(self.headers))) + "|"
        body = ["| " + " | ".join(cell(c) for c in row) + " |" for row in self.rows]
        out = [f"**{cell(self.title)}**", "", head, rule, *body]
        if self.caption:
            out += ["", f"_{self.caption}_"]
        return "\n".join(out)

    def records(self) -> list[dict[str, str]]:
        """Rows as dicts keyed by header (for JSON)."""
        return [dict(zip(self.headers, row)) for row in self.rows]


@dataclass(frozen=True)
class Line:
    """A line of report text and its kind: ``""`` (plain), ``"dim"``, ``"warning"``, ``"error"`` or ``"note"``."""

    text: str
    kind: str = ""

    def rich(self) -> str:
        """The line as rich markup (its text escaped: error messages hold brackets)."""
        from rich.markup import escape

        text = escape(self.text)
        return {"dim": f"[dim]{text}[/dim]", "warning": f"[bold yellow]warning[/bold yellow] {text}",
                "error": f"[bold red]{text}[/bold red]", "note": f"[yellow]note[/yellow] {text}",
                "strong": f"[bold]{text}[/bold]"}.get(self.kind, text)  # fmt: skip

    def markdown(self) -> str:
        """The line as Markdown."""
        return {"warning": f"> **warning** {self.text}", "error": f"**{self.text}**", "note": f"> note: {self.text}",
                "dim": f"_{self.text}_", "strong": f"**{self.text}**"}.get(self.kind, self.text)  # fmt: skip


def markdown(blocks: Sequence[Any]) -> str:
    """`Grid` and `Line` blocks as one Markdown document (paragraphs apart)."""
    out: list[str] = []
    for b in blocks:
        if isinstance(b, Grid):
            out += ["", b.markdown(), ""]
        else:
            out.append(b.markdown() + "  ")
    return "\n".join(out).strip() + "\n"


def make_console(file: Optional[IO[str]] = None, stderr: bool = False) -> Any:
    """A rich console: the terminal's width on a terminal; on a pipe or file, `PIPE_WIDTH` (unless ``COLUMNS``
    is set), so tables print at full width instead of being cut at 80 columns."""
    from rich.console import Console

    stream = file if file is not None else (sys.stderr if stderr else sys.stdout)
    console = Console(file=stream)
    if not console.is_terminal and "COLUMNS" not in os.environ:
        console = Console(file=stream, width=PIPE_WIDTH)
    return console
