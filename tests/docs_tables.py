"""The tables the docs pages carry that the package generates: where each lives, and how to
write it again. ``python -m tests.docs_tables`` rewrites them in place after a change to the
settings table or the exit codes; ``tests/test_readme.py`` fails while a page's copy differs."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from nb_durable.agent.settings.flags import settings_table
from nb_durable.cli.commands import exit_code_table

__all__ = ["TABLES", "regenerated", "table_after"]

DOCS = Path(__file__).resolve().parents[1] / "docs"

TABLES: dict[str, tuple[str, Callable[[], str]]] = {
    "<!-- exit codes: generated from nb_durable.cli.commands.EXIT_MEANINGS": ("cli.md", exit_code_table),
    "<!-- settings: generated from nb_durable.agent.settings.flags.settings_table": ("configuration.md", settings_table),
}
"""Each table's marker comment, the page that holds it, and what makes it."""


def table_after(text: str, marker: str) -> str:
    """The table a page has under ``marker``'s line (its lines that start with ``|``)."""
    after = text.split(marker, 1)[1].split("\n", 1)[1]
    lines = after.split("\n")
    rows = next((i for i, line in enumerate(lines) if not line.startswith("|")), len(lines))
    return "\n".join(lines[:rows]) + "\n"


def regenerated(text: str, marker: str, table: str) -> str:
    """``text`` with the table under ``marker`` replaced by ``table``."""
    old = table_after(text, marker)
    head, rest = text.split(marker, 1)
    comment, after = rest.split("\n", 1)
    return head + marker + comment + "\n" + table.rstrip("\n") + "\n" + after[len(old):]


def main() -> None:
    for marker, (page, make) in TABLES.items():
        path = DOCS / page
        text = path.read_text()
        new = regenerated(text, marker, make())
        if new != text:
            path.write_text(new)
            print(f"rewrote the table in docs/{page}")


if __name__ == "__main__":
    main()
