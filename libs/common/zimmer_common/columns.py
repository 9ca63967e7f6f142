"""Helpers for declaring SQLModel table models exactly as the migrations build them (plumbing:
each service's `tables.py` declares its own tables with these)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import BigInteger, Column, DateTime, Identity, text
from sqlmodel import Field

TIMESTAMPTZ = DateTime(timezone=True)


def col(type_: Any, *args: Any, null: bool = False, default: str | None = None, **kw: Any) -> Any:
    """A field mapped to exactly this column; `default` is the server default, as SQL."""
    return Field(sa_column=Column(type_, *args, nullable=null, server_default=text(default) if default else None,
                                  **kw))


def identity() -> Any:
    """`bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY`."""
    return Field(default=None, sa_column=Column(BigInteger, Identity(always=True), primary_key=True))
