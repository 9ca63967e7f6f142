"""`zimmer backlog import`: the one-time import of WORK_BACKLOG.json, with a progress bar.

The backlog's own subcommand of `zimmer`: declared in the `zimmer.commands` entry-point group
(pyproject.toml), which the CLI loads by group, so the CLI imports no service module by name
(docs/architecture.md). The service's modules are imported when the command runs, not when `zimmer`
starts."""

from __future__ import annotations

import asyncio
import os
from typing import Annotated, Any

import typer

from zimmer_cli.common import DataDir, _embedded_postgres, _settings

backlog_app = typer.Typer(help="The work backlog.", no_args_is_help=True)


@backlog_app.command("import")
def backlog_import(
        path: Annotated[str | None, typer.Argument(help="WORK_BACKLOG.json to read (default: "
                                                   "$WORK_BACKLOG_SOURCE_PATH, then the GitHub contents API)")] = None,
        data_dir: DataDir = None) -> None:
    """Import WORK_BACKLOG.json into the work backlog (embedded PostgreSQL unless ZIMMER_DATABASE_URL is set;
    a running `zimmer up` on the same data directory is used as it is, never stopped).
    Inserts only, keyed on each item's id, so a second run writes nothing; precedences verbatim."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from zimmer_backlog.importer import ImportSourceUnavailable, resolve_source
    from zimmer_common.settings import Environment

    pg = None
    url = os.environ.get("ZIMMER_DATABASE_URL")
    try:
        if not url:
            pg = _embedded_postgres(data_dir)
            url = pg.ensure_database("zimmer")
        env = _settings(database_url=url).env
        source = resolve_source(path)
        with Progress(TextColumn("[bold]importing[/] {task.description}"), BarColumn(), MofNCompleteColumn(),
                      TimeElapsedColumn()) as bar:
            task = bar.add_task(source.describe(), total=None)
            try:
                report = asyncio.run(_import_backlog(
                    url, source, env, lambda done, total: bar.update(task, completed=done, total=total)))
            except ImportSourceUnavailable as exc:
                typer.secho(f"import failed in {Environment.PRODUCTION.value}: {exc}", fg="red", err=True)
                raise typer.Exit(1) from None
    finally:
        if pg:
            pg.stop()
    typer.echo(f"source    {report.source}  (import run {report.run_id})")
    if report.source_unavailable:
        typer.secho(f"nothing imported: {report.error} (recorded on the import run; outside production "
                    "this is not an error)", fg="yellow")
        return
    typer.echo(f"inserted  {report.inserted}")
    reasons = {r: len(report.skipped_for(r)) for r in dict.fromkeys(s.reason for s in report.skipped)}
    typer.echo(f"skipped   {len(report.skipped)}" + (f"  ({', '.join(f'{n} {r}' for r, n in reasons.items())})"
                                                     if reasons else ""))
    for s in report.skipped:
        if s.reason != "already_imported":
            typer.secho(f"  - {s.id}: {s.reason}: {s.detail}", fg="yellow")


async def _import_backlog(url: str, source: Any, env: Any, progress: Any) -> Any:
    from zimmer_backlog.importer import import_backlog
    from zimmer_backlog.store.tables import SCHEMA
    from zimmer_common.db import create_engine
    from zimmer_common.db import migrate as run_migrations

    await run_migrations(url, SCHEMA, "zimmer_backlog.migrations")
    engine = create_engine(url, pool_size=2, max_overflow=0, app_name="zimmer-backlog-import")
    try:
        return await import_backlog(engine, source=source, env=env, progress=progress)
    finally:
        await engine.dispose()
