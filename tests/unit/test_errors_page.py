"""Every ERROR pages (seed 003 "Alerts": "The ERROR record is the repeating page"; issue 26 #8).

An ERROR log record that pages nobody is a page lost: every `log.error` / `log.exception` /
`log.critical` in the services and libraries either goes through the pager (`page_or_log`,
`pager.report`) instead, or carries a comment right above it that starts "ERROR without a page:"
and says why (the page's own record; an outage Prometheus pages on from outside)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SOURCES = sorted([*ROOT.glob("libs/*/zimmer_*/**/*.py"), *ROOT.glob("services/*/zimmer_*/**/*.py")])
LOGGERS = {"log", "logger", "logging"}
ERROR_METHODS = {"error", "exception", "critical"}
JUSTIFIED = "# ERROR without a page:"


def error_sites(path: Path) -> list[int]:
    """Lines that reach an ERROR method of a logger (called or taken as a value)."""
    tree = ast.parse(path.read_text(), str(path))
    return sorted({node.lineno for node in ast.walk(tree)
                   if isinstance(node, ast.Attribute) and node.attr in ERROR_METHODS
                   and isinstance(node.value, ast.Name) and node.value.id in LOGGERS})


def justified(lines: list[str], lineno: int) -> bool:
    """A comment starting "ERROR without a page:" on the lines just above (its continuation
    comment lines included)."""
    i = lineno - 2
    while i >= 0 and lines[i].strip().startswith("#"):
        if lines[i].strip().startswith(JUSTIFIED):
            return True
        i -= 1
    return False


def test_the_scan_reads_the_tree() -> None:
    assert len(SOURCES) > 100
    assert error_sites(ROOT / "libs/common/zimmer_common/paging.py")  # the one place plumbing logs ERROR


def test_every_error_log_pages_or_says_why_not() -> None:
    unjustified = []
    for path in SOURCES:
        lines = path.read_text().splitlines()
        for lineno in error_sites(path):
            if not justified(lines, lineno):
                unjustified.append(f"{path.relative_to(ROOT)}:{lineno}: {lines[lineno - 1].strip()}")
    assert unjustified == [], "ERROR records that page nobody:\n" + "\n".join(unjustified)
