"""What the `zimmer` commands share: service factories, settings, the data directory and the
one-off commands' embedded PostgreSQL."""

from __future__ import annotations

import importlib
import os
import subprocess
from pathlib import Path
from typing import Annotated, Any

import typer

from zimmer_cli.registry import SERVICES

DataDir = Annotated[Path | None, typer.Option("--data-dir", help="Where embedded servers keep their data "
                                               "(default: $ZIMMER_DATA_DIR or ./.zimmer)")]


def _load_factory(name: str) -> Any:
    if name not in SERVICES:
        raise typer.BadParameter(f"unknown service {name!r}; one of: {', '.join(SERVICES)}")
    module, attr = SERVICES[name].split(":")
    return getattr(importlib.import_module(module), attr)


def _settings(**overrides: Any) -> Any:
    from zimmer_common.settings import ConfigurationError, load_settings

    try:
        return load_settings(**overrides)
    except ConfigurationError as exc:
        typer.secho(f"configuration error: {exc}", fg="red", err=True)
        raise typer.Exit(2) from None


def _data_dir(option: Path | None) -> Path:
    return (option or Path(os.environ.get("ZIMMER_DATA_DIR", ".zimmer"))).resolve()


def _embedded_postgres(data_dir: Path | None) -> Any:
    """The data directory's PostgreSQL for a one-off command: the running one (`zimmer up`), else a
    temporary postmaster that `stop()` stops."""
    from zimmer_cli.embedded import EmbeddedPostgres

    root = _data_dir(data_dir)
    try:
        return EmbeddedPostgres(root / "pg", log_file=root / "logs" / "postgres.log")
    except (RuntimeError, OSError, subprocess.SubprocessError) as exc:
        typer.secho(f"embedded PostgreSQL: {exc}", fg="red", err=True)
        raise typer.Exit(1) from None
