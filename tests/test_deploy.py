"""Static checks of the distributed deployment (docker-compose.yml and deploy/).

There is no Docker engine where the tests run, so the compose file, the image and the
observability configuration must be right by construction: these tests parse them and check
them against the code (the service registry of `zimmer serve`) and against each other.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import yaml

from zimmer_alerts.config import AlertSettings
from zimmer_backlog.config import GithubSettings
from zimmer_cli.registry import SERVICES
from zimmer_common.settings import Settings
from zimmer_sweeper.disk.config import DiskSettings
from zimmer_sweeper.logs.config import LogIngestSettings

ROOT = Path(__file__).resolve().parents[1]
COMPOSE_FILE = ROOT / "docker-compose.yml"
DOCKERFILE = ROOT / "deploy" / "Dockerfile"
PROMETHEUS_FILE = ROOT / "deploy" / "prometheus.yml"
ALERTS_FILE = ROOT / "deploy" / "prometheus" / "alerts.yml"
DASHBOARD_DIR = ROOT / "deploy" / "grafana" / "dashboards"
# The overview (zimmer.json) and one dashboard per bounded context (deploy/grafana/build_dashboards.py).
DASHBOARD_FILES = {"zimmer.json", "backlog.json", "spot-gate.json", "sweeper.json", "alerts-health.json", "gateway.json"}
GRAFANA_PROVISIONING = ROOT / "deploy" / "grafana" / "provisioning"

# Every setting Zimmer reads from the environment, derived from the Settings model itself: a
# misspelt variable in the compose file or the image is not one of these and fails here.
KNOWN_ZIMMER_ENV = {f"ZIMMER_{name.upper()}" for name in
                    [*Settings.model_fields, *GithubSettings.model_fields, *AlertSettings.model_fields,
                     *(f"log_ingest_{name}" for name in LogIngestSettings.model_fields),
                     *(f"sweeper_{name}" for name in DiskSettings.model_fields)]}
ZIMMER_ENVS = {"production", "staging", "development", "test"}
SECRETS = ("ZIMMER_API_KEY", "ZIMMER_OPERATOR_TOKEN")

DEFAULT_METRICS_PORT = 9100
DEFAULT_HTTP_PORT = 8000
GATEWAY = "gateway"
MIN_NATS = (2, 12)


# --------------------------------------------------------------------------------- helpers


@pytest.fixture(scope="module")
def compose() -> dict:
    data = yaml.safe_load(COMPOSE_FILE.read_text())
    assert isinstance(data, dict) and isinstance(data.get("services"), dict)
    return data


@pytest.fixture(scope="module")
def services(compose: dict) -> dict[str, dict]:
    return compose["services"]


@pytest.fixture(scope="module")
def prometheus() -> dict:
    return yaml.safe_load(PROMETHEUS_FILE.read_text())


def _command(svc: dict) -> list[str]:
    cmd = svc.get("command")
    if cmd is None:
        return []
    if isinstance(cmd, str):
        return shlex.split(cmd)
    return [str(part) for part in cmd]


def _flags(args: list[str]) -> dict[str, str | None]:
    """`--name=v`, `--name v`, `-x v` and bare `-js` into {'name': v, 'x': v, 'js': None}."""
    out: dict[str, str | None] = {}
    i = 0
    while i < len(args):
        arg = args[i]
        if not arg.startswith("-"):
            i += 1
            continue
        name = arg.lstrip("-")
        if "=" in name:
            key, value = name.split("=", 1)
            out[key] = value
        elif i + 1 < len(args) and not args[i + 1].startswith("-"):
            out[name] = args[i + 1]
            i += 1
        else:
            out[name] = None
        i += 1
    return out


def _build_dockerfile(svc: dict) -> str | None:
    build = svc.get("build")
    if build is None:
        return None
    if isinstance(build, str):
        return str(Path(build) / "Dockerfile")
    # The dockerfile is relative to the build context.
    return (Path(build.get("context", ".")) / build.get("dockerfile", "Dockerfile")).as_posix()


def _zimmer_services(services: dict[str, dict]) -> dict[str, dict]:
    return {
        name: svc
        for name, svc in services.items()
        if _build_dockerfile(svc) == "deploy/Dockerfile"
    }


def _environment(svc: dict) -> dict[str, str]:
    env = svc.get("environment") or {}
    if isinstance(env, list):
        env = dict(item.split("=", 1) if "=" in item else (item, "") for item in env)
    return {str(k): "" if v is None else str(v) for k, v in env.items()}


def _nats_services(services: dict[str, dict]) -> dict[str, dict]:
    return {n: s for n, s in services.items() if str(s.get("image", "")).startswith("nats:")}


def _expected_port(name: str, env: dict[str, str]) -> int:
    if name == GATEWAY:
        return int(env.get("ZIMMER_HTTP_PORT", DEFAULT_HTTP_PORT))
    return int(env.get("ZIMMER_METRICS_PORT", DEFAULT_METRICS_PORT))


def _dockerfile_instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) per instruction, continuation lines joined, comments dropped."""
    lines: list[str] = []
    pending = ""
    for raw in DOCKERFILE.read_text().splitlines():
        stripped = raw.strip()
        if not pending and (not stripped or stripped.startswith("#")):
            continue
        if stripped.endswith("\\"):
            pending += stripped[:-1] + " "
            continue
        lines.append(pending + stripped)
        pending = ""
    out = []
    for line in lines:
        instr, _, rest = line.partition(" ")
        out.append((instr.upper(), rest.strip()))
    return out


# ----------------------------------------------------------------------- (a), (b): services


def test_image_services_run_a_registered_service(services: dict[str, dict]) -> None:
    zimmer = _zimmer_services(services)
    assert zimmer, "no compose service is built from deploy/Dockerfile"
    for name, svc in zimmer.items():
        cmd = _command(svc)
        assert len(cmd) == 2 and cmd[0] == "serve", f"{name}: command {cmd!r} is not ['serve', X]"
        assert cmd[1] in SERVICES, f"{name}: `zimmer serve {cmd[1]}` names no registered service"


# The sweeper runs beside the disk it sweeps (DESIGN §9): one compose service per runtime host,
# each a single replica naming its host and mounting that host's volume, rather than replicas.
PER_HOST = {"sweeper": "sweeper-runner-"}


def _deployed_as(services: dict[str, dict], name: str) -> list[str]:
    """The compose services that deploy registered service `name`."""
    prefix = PER_HOST.get(name)
    return sorted(s for s in _zimmer_services(services) if (s.startswith(prefix) if prefix else s == name))


def test_the_sweeper_runs_once_per_runtime_host_beside_its_disk(services: dict[str, dict]) -> None:
    hosts = _deployed_as(services, "sweeper")
    assert len(hosts) >= 2, f"show at least two runtime hosts, not {hosts}"
    seen_hosts, seen_volumes = set(), set()
    for name in hosts:
        svc = services[name]
        env = _environment(svc)
        assert _command(svc) == ["serve", "sweeper"], name
        assert (svc.get("deploy") or {}).get("replicas") == 1, f"{name}: one sweeper per host"
        assert env.get("ZIMMER_HOST") and env["ZIMMER_HOST"] not in seen_hosts, f"{name}: ZIMMER_HOST"
        seen_hosts.add(env["ZIMMER_HOST"])
        clones = env.get("ZIMMER_SWEEPER_CLONES_DIR", "")
        mounts = [str(v).split(":") for v in svc.get("volumes") or []]
        volume = next((m[0] for m in mounts if len(m) >= 2 and clones.startswith(m[1])), None)
        assert volume and volume not in seen_volumes, f"{name}: its clones dir must be on its own host's volume"
        seen_volumes.add(volume)


def test_every_registered_service_is_deployed_twice(services: dict[str, dict]) -> None:
    zimmer = _zimmer_services(services)
    for name in SERVICES:
        if name in PER_HOST:
            continue  # one per host: the test above
        assert name in zimmer, f"service {name!r} is missing from docker-compose.yml"
        svc = zimmer[name]
        assert _command(svc) == ["serve", name], f"{name} runs {_command(svc)!r}"
        assert (svc.get("deploy") or {}).get("replicas") == 2, f"{name}: deploy.replicas != 2"
        # Replicas would collide on a fixed container name.
        assert "container_name" not in svc, f"{name}: container_name prevents replicas"


def test_services_wait_for_postgres_and_nats(services: dict[str, dict]) -> None:
    nats = set(_nats_services(services))
    for name, svc in _zimmer_services(services).items():
        deps = svc.get("depends_on") or {}
        assert isinstance(deps, dict), f"{name}: depends_on must use the long form"
        assert deps.get("postgres", {}).get("condition") == "service_healthy", name
        assert nats <= set(deps), f"{name} does not depend on {sorted(nats - set(deps))}"


def test_every_service_has_a_healthcheck_through_its_own_ping(services: dict[str, dict]) -> None:
    """`zimmer status --service NAME` (the service's ping over NATS, its database included), so that
    `condition: service_healthy` means the service can serve (issue 31 #4)."""
    for name, svc in _zimmer_services(services).items():
        registered = _command(svc)[1]
        check = svc.get("healthcheck") or {}
        test = check.get("test")
        assert isinstance(test, list) and test[0] == "CMD", f"{name}: healthcheck test must be an exec form"
        args = test[1:]
        assert args[:4] == ["zimmer", "status", "--service", registered], f"{name}: healthcheck {test!r}"
        assert not check.get("disable"), name
        timeout = float(_flags(args).get("timeout") or 2.0)
        # The CLI bounds itself at twice its ping timeout; Docker's timeout must leave it that long.
        assert _seconds(check["timeout"]) > 2 * timeout, f"{name}: healthcheck timeout {check['timeout']}"
        assert _seconds(check.get("start_period", "0s")) >= 30, f"{name}: give the migrations a start_period"


def test_the_gateway_starts_once_the_others_are_healthy(services: dict[str, dict]) -> None:
    deps = services[GATEWAY]["depends_on"]
    for name in SERVICES:
        if name == GATEWAY:
            continue
        deployed = _deployed_as(services, name)
        assert any(deps.get(d, {}).get("condition") == "service_healthy" for d in deployed), (
            f"gateway does not wait for {name} to be healthy: {deps}")


def _seconds(duration: str) -> float:
    total, number = 0.0, ""
    for part in re.findall(r"(\d+(?:\.\d+)?)(ms|us|ns|h|m|s)", str(duration)):
        number, unit = part
        total += float(number) * {"h": 3600, "m": 60, "s": 1, "ms": 1e-3, "us": 1e-6, "ns": 1e-9}[unit]
    assert number, f"not a duration: {duration!r}"
    return total


def test_gateway_publishes_its_http_port(services: dict[str, dict]) -> None:
    gateway = services[GATEWAY]
    port = _expected_port(GATEWAY, _environment(gateway))
    published = []
    for spec in gateway.get("ports") or []:
        if isinstance(spec, dict):
            published.append(int(spec["target"]))
        else:
            published.append(int(str(spec).rsplit(":", 1)[-1].split("/")[0]))
    assert port in published, f"gateway does not publish container port {port}: {gateway.get('ports')}"


def test_shared_environment(compose: dict, services: dict[str, dict]) -> None:
    assert isinstance(compose.get("x-zimmer-env"), dict), "x-zimmer-env anchor is missing"
    nats = sorted(_nats_services(services))
    for name, svc in _zimmer_services(services).items():
        env = _environment(svc)
        assert env.get("ZIMMER_ENV") == "production", name
        assert env["ZIMMER_ENV"] in ZIMMER_ENVS

        db = urlsplit(env["ZIMMER_DATABASE_URL"].replace("${", "").replace("}", ""))
        assert db.scheme == "postgresql", name
        assert env["ZIMMER_DATABASE_URL"].split("@", 1)[1].startswith("postgres:5432/"), name
        assert "postgres" in services

        urls = [urlsplit(u.strip()) for u in env["ZIMMER_NATS_URL"].split(",")]
        assert all(u.scheme == "nats" for u in urls), name
        assert sorted(u.hostname for u in urls) == nats, f"{name}: NATS URL must list {nats}"
        assert all(u.port == 4222 for u in urls), name

        for secret in SECRETS:
            # A missing secret must stop `docker compose up`, not start a service without it.
            assert re.fullmatch(rf"\$\{{{secret}:\?[^}}]+\}}", env.get(secret, "")), (
                f"{name}: {secret} must be ${{{secret}:?...}}"
            )


# --------------------------------------------------------------------------- (c): NATS


def test_three_node_jetstream_cluster(services: dict[str, dict]) -> None:
    nats = _nats_services(services)
    assert len(nats) == 3, f"expected three NATS services, found {sorted(nats)}"
    names = set(nats)
    server_names = set()
    for name, svc in nats.items():
        m = re.match(r"nats:(\d+)\.(\d+)", svc["image"])
        assert m and (int(m[1]), int(m[2])) >= MIN_NATS, f"{name}: {svc['image']} is older than 2.12"
        cmd = _command(svc)
        flags = _flags(cmd)
        assert "-js" in cmd or "js" in flags, f"{name}: JetStream is not enabled"
        assert flags.get("sd") == "/data", f"{name}: JetStream store dir is not /data"
        assert flags.get("cluster_name") == "zimmer", name
        assert flags.get("cluster") == "nats://0.0.0.0:6222", name
        assert flags.get("m") == "8222" or flags.get("http_port") == "8222", name
        server_names.add(flags.get("name") or flags.get("server_name") or flags.get("n"))

        routes = [urlsplit(r.strip()) for r in (flags.get("routes") or "").split(",") if r.strip()]
        assert {r.hostname for r in routes} == names - {name}, f"{name}: routes {flags.get('routes')!r}"
        assert all(r.scheme == "nats" and r.port == 6222 for r in routes), name

        volumes = svc.get("volumes") or []
        assert any(str(v).endswith(":/data") for v in volumes), f"{name}: no volume at /data"
    # JetStream clustering needs stable, distinct server names.
    assert None not in server_names and len(server_names) == 3, server_names
    data_volumes = [str(v).split(":")[0] for s in nats.values() for v in s["volumes"]]
    assert len(set(data_volumes)) == 3, "each NATS node needs its own volume"


def test_postgres(services: dict[str, dict]) -> None:
    pg = services["postgres"]
    assert pg["image"].startswith("postgres:16")
    assert "pg_isready" in " ".join(map(str, pg["healthcheck"]["test"]))
    assert pg.get("volumes")


# ---------------------------------------------------------------------- (d): Prometheus


def _job_targets(job: dict) -> list[tuple[str, int]]:
    targets = []
    for sd in job.get("dns_sd_configs") or []:
        assert sd.get("type", "SRV") == "A", "A records need an explicit port"
        for host in sd["names"]:
            targets.append((host, int(sd["port"])))
    for static in job.get("static_configs") or []:
        for target in static["targets"]:
            host, _, port = str(target).rpartition(":")
            targets.append((host, int(port)))
    return targets


def test_prometheus_scrapes_every_service(prometheus: dict, services: dict[str, dict]) -> None:
    jobs = {job["job_name"]: job for job in prometheus["scrape_configs"]}
    zimmer_jobs = {name for name in jobs if name.startswith("zimmer-")}
    assert zimmer_jobs == {f"zimmer-{name}" for name in SERVICES}
    for name in SERVICES:
        job = jobs[f"zimmer-{name}"]
        assert job.get("metrics_path", "/metrics") == "/metrics"
        deployed = _deployed_as(services, name)
        port = _expected_port(name, _environment(services[deployed[0]]))
        targets = _job_targets(job)
        assert targets, f"zimmer-{name} has no targets"
        assert {host for host, _ in targets} >= set(deployed) or name not in PER_HOST, f"zimmer-{name}: {targets}"
        for host, target_port in targets:
            assert host in {*deployed, *(f"tasks.{d}" for d in deployed)}, f"zimmer-{name} scrapes {host!r}"
            assert target_port == port, f"zimmer-{name} scrapes port {target_port}, not {port}"
    assert prometheus["rule_files"] == ["/etc/prometheus/alerts.yml"]


def test_prometheus_mounts(services: dict[str, dict]) -> None:
    mounts = {}
    for svc in ("prometheus", "grafana"):
        for volume in services[svc].get("volumes") or []:
            source, target = str(volume).split(":")[:2]
            if source.startswith("./"):
                assert (ROOT / source).exists(), f"{svc} mounts missing {source}"
                mounts[target] = (ROOT / source).resolve()
    assert mounts["/etc/prometheus/prometheus.yml"] == PROMETHEUS_FILE.resolve()
    assert mounts["/etc/prometheus/alerts.yml"] == ALERTS_FILE.resolve()
    assert mounts["/etc/grafana/provisioning"] == GRAFANA_PROVISIONING.resolve()


def test_alert_rules() -> None:
    data = yaml.safe_load(ALERTS_FILE.read_text())
    rules = [rule for group in data["groups"] for rule in group["rules"]]
    for rule in rules:
        assert {"alert", "expr", "for"} <= set(rule), rule
        assert re.fullmatch(r"\d+[smh]", str(rule["for"])), rule
    names = {rule["alert"] for rule in rules}
    assert {"ZimmerServiceDown", "ZimmerOutboxBacklog", "ZimmerJobFailures", "ZimmerDependencyDown",
            "ZimmerRequestsPastTheirDeadline", "ZimmerBusy", "ZimmerAlertSinkFailing", "ZimmerGithubUnreadable",
            "ZimmerLivenessSweepStale", "ZimmerStrandedBandStoreFailing", "ZimmerLogIngestBehind",
            "ZimmerLogRetentionStale", "ZimmerLogPartitionDropFailing"} <= names
    assert len(names) == len(rules), "duplicate alert names"


def _promtool() -> str:
    """Debian's promtool (package `prometheus`). CI installs it and sets ZIMMER_REQUIRE_PROMTOOL,
    so there a missing promtool fails; on a developer machine without it these two tests skip,
    saying how to get it."""
    found = shutil.which("promtool")
    if found:
        return found
    if os.environ.get("ZIMMER_REQUIRE_PROMTOOL"):
        pytest.fail("promtool is required here (ZIMMER_REQUIRE_PROMTOOL is set) and is not on PATH")
    pytest.skip("promtool not installed (apt-get install prometheus); CI runs these")


def test_alert_rules_pass_promtool_check() -> None:
    run = subprocess.run([_promtool(), "check", "rules", str(ALERTS_FILE)], capture_output=True, text=True)
    assert run.returncode == 0, run.stdout + run.stderr


def test_alert_rules_fire_when_they_should() -> None:
    """deploy/prometheus/alerts_test.yml: each rule against series that should and should not fire it."""
    run = subprocess.run([_promtool(), "test", "rules", str(ALERTS_FILE.with_name("alerts_test.yml"))],
                         capture_output=True, text=True)
    assert run.returncode == 0, run.stdout + run.stderr


# ------------------------------------------------------------------------- Grafana


def test_grafana_provisioning() -> None:
    datasources = [
        ds
        for f in (GRAFANA_PROVISIONING / "datasources").glob("*.y*ml")
        for ds in yaml.safe_load(f.read_text())["datasources"]
    ]
    assert any(ds["type"] == "prometheus" and ds["url"] == "http://prometheus:9090" for ds in datasources)
    uids = {ds.get("uid") for ds in datasources}

    providers = [
        p
        for f in (GRAFANA_PROVISIONING / "dashboards").glob("*.y*ml")
        for p in yaml.safe_load(f.read_text())["providers"]
    ]
    assert any(p["options"]["path"] == "/etc/grafana/dashboards" for p in providers)

    dashboards = _dashboards()
    assert set(dashboards) == DASHBOARD_FILES, "a dashboard per bounded context, and the overview"
    assert dashboards["zimmer.json"]["uid"] == "zimmer-overview"  # the overview kept its address
    assert len({d["uid"] for d in dashboards.values()}) == len(dashboards)
    for name, dashboard in dashboards.items():
        panels = dashboard["panels"]
        rows = [p for p in panels if p["type"] == "row"]
        charts = [p for p in panels if p["type"] != "row"]
        assert len(rows) >= 2 and charts, name
        assert len({p["id"] for p in panels}) == len(panels), f"{name}: panel ids repeat"
        variables = {v["name"]: v for v in dashboard["templating"]["list"]}
        assert "instance" in variables, name
        for v in variables.values():
            assert v["datasource"]["uid"] in uids, (name, v["name"])
        for panel in charts:
            assert panel["datasource"]["uid"] in uids, (name, panel["title"])
            assert panel["targets"], (name, panel["title"])
            for target in panel["targets"]:
                assert target["datasource"] == panel["datasource"], (name, panel["title"])
                for var in variables:  # every query is narrowed by the dashboard's variables
                    if var == "instance" or f"{var}=" in target["expr"]:
                        assert f'=~"${var}"' in target["expr"], (name, panel["title"], target["expr"])


def test_dashboards_are_the_generators_output() -> None:
    """deploy/grafana/build_dashboards.py writes the JSON: run it after changing its tables."""
    files = _dashboard_generator().rendered()
    assert set(files) == DASHBOARD_FILES
    for name, text in files.items():
        assert (DASHBOARD_DIR / name).read_text() == text, f"{name} is stale: run deploy/grafana/build_dashboards.py"


def test_every_dashboard_query_names_an_exported_metric(exported_families: dict[str, str]) -> None:
    samples = {"up"} | {s for name, kind in exported_families.items() for s in _sample_names(name, kind)}
    for name, dashboard in _dashboards().items():
        for expr in _exprs(dashboard):
            named = set(re.findall(r"\b(?:zimmer_[a-z0-9_]+|up)\b(?=\s*[{\[)])", expr))
            assert named, (name, expr)
            assert named <= samples, f"{name}: {sorted(named - samples)} is exported by no service ({expr})"


# Exported families no dashboard charts, each with the reason. Keep it short: a family is exported
# to be read, and one that no panel and no alert reads should rather go.
NOT_CHARTED: dict[str, str] = {
    # (none: every family the services export is on a dashboard)
}


def test_every_exported_metric_family_is_on_a_dashboard(exported_families: dict[str, str]) -> None:
    charted = "\n".join(expr for dashboard in _dashboards().values() for expr in _exprs(dashboard))
    missing = {name for name, kind in exported_families.items()
               if name not in NOT_CHARTED and not any(re.search(rf"\b{s}\b", charted) for s in _sample_names(name, kind))}
    assert not missing, f"exported, on no dashboard and not in NOT_CHARTED: {sorted(missing)}"
    assert not set(NOT_CHARTED) - set(exported_families), "NOT_CHARTED names a family no service exports"
    assert not {n for n in NOT_CHARTED if re.search(rf"\b{n}", charted)}, "NOT_CHARTED names a charted family"


def test_every_histogram_has_a_latency_panel(exported_families: dict[str, str]) -> None:
    quantiles = [e for d in _dashboards().values() for e in _exprs(d) if e.startswith("histogram_quantile(")]
    for name, kind in exported_families.items():
        if kind == "histogram" and name not in NOT_CHARTED:
            assert any(re.search(rf"rate\({name}_bucket\{{[^}}]*\}}\[5m\]\)", e) and re.search(r"by \([^)]*\ble\)", e)
                       for e in quantiles), f"no histogram_quantile panel over {name}_bucket by le"
    for needed in ("zimmer_rpc_seconds", "zimmer_http_request_duration_seconds"):
        assert exported_families.get(needed) == "histogram", needed


def test_dashboard_queries_pass_promtool() -> None:
    """Every query, as a recording rule, through `promtool check rules` (PromQL syntax and types;
    the dashboards' variables are inside label matchers' strings, so the queries parse as they are)."""
    rules = [{"record": f"dashboard:query:{i}", "expr": expr}
             for i, expr in enumerate(e for d in _dashboards().values() for e in _exprs(d))]
    path = Path(os.environ.get("TMPDIR", "/tmp")) / f"zimmer-dashboard-queries-{os.getpid()}.yml"
    path.write_text(yaml.safe_dump({"groups": [{"name": "dashboards", "rules": rules}]}))
    try:
        run = subprocess.run([_promtool(), "check", "rules", str(path)], capture_output=True, text=True)
    finally:
        path.unlink()
    assert run.returncode == 0, run.stdout + run.stderr


@pytest.fixture(scope="module")
def exported_families() -> dict[str, str]:
    """Every metric family the services export, name → type: each registered service built as
    `zimmer serve` builds it (nothing started: no database or NATS needed), its registry read."""
    import importlib

    settings = Settings(api_key="k", operator_token="t", metrics_port=-1, http_port=0)
    families: dict[str, str] = {}
    for target in SERVICES.values():
        module, attr = target.split(":")
        service = getattr(importlib.import_module(module), attr)(settings)
        families.update({f.name: f.type for f in service.metrics.registry.collect()})
    return families


def _sample_names(family: str, kind: str) -> list[str]:
    return {"counter": [f"{family}_total"], "info": [f"{family}_info"],
            "histogram": [f"{family}_bucket", f"{family}_count", f"{family}_sum"],
            "summary": [f"{family}_count", f"{family}_sum", family]}.get(kind, [family])


def _dashboards() -> dict[str, dict]:
    return {f.name: json.loads(f.read_text()) for f in sorted(DASHBOARD_DIR.glob("*.json"))}


def _exprs(dashboard: dict) -> list[str]:
    return [t["expr"] for p in dashboard["panels"] if p["type"] != "row" for t in p["targets"]]


def _dashboard_generator():  # type: ignore[no-untyped-def]  # a test helper: fixture values are untyped
    import importlib.util

    spec = importlib.util.spec_from_file_location("build_dashboards", DASHBOARD_DIR.parent / "build_dashboards.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault(spec.name, module)  # its dataclasses look their module up while it loads
    spec.loader.exec_module(sys.modules[spec.name])
    return sys.modules[spec.name]


# ------------------------------------------------------------------------ (e): image


def test_dockerfile() -> None:
    instructions = _dockerfile_instructions()
    entrypoints = [json.loads(args) for instr, args in instructions if instr == "ENTRYPOINT"]
    assert entrypoints and entrypoints[-1] == ["zimmer"]
    cmds = [json.loads(args) for instr, args in instructions if instr == "CMD"]
    assert cmds and cmds[-1] == ["serve", GATEWAY]

    froms = [args.split()[0] for instr, args in instructions if instr == "FROM"]
    args = dict(
        a.split("=", 1) for instr, a in instructions if instr == "ARG" and "=" in a
    )
    images = [args.get(f[2:-1], f) if f.startswith("${") else f for f in froms]
    assert all(img == "python:3.11-slim" for img in images), images

    users = [a for instr, a in instructions if instr == "USER"]
    assert users, "the image must not run as root"
    user = users[-1].split(":")[0]
    user = args.get(user[2:-1], user) if user.startswith("${") else user
    assert user not in ("root", "0"), user

    assert any(instr == "RUN" and "pip install" in a and re.search(r"\s\.(\s|$)", a) for instr, a in instructions)
    copied = " ".join(a for instr, a in instructions if instr == "COPY" and "--from" not in a)
    for needed in ("pyproject.toml", "libs/", "services/"):
        assert needed in copied, f"Dockerfile does not copy {needed}"
    assert not re.search(r"COPY\s+\.\s", DOCKERFILE.read_text()), "copy only what the image needs"


def test_dockerignore() -> None:
    entries = {
        line.strip().rstrip("/")
        for line in (ROOT / ".dockerignore").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    }
    for needed in (".venv", ".zimmer", ".git", "bench/results"):
        assert needed in entries, needed
    assert "__pycache__" in entries or "**/__pycache__" in entries


# -------------------------------------------------------------------- (f): env variables


def test_only_known_zimmer_variables() -> None:
    for path in (COMPOSE_FILE, DOCKERFILE):
        used = set(re.findall(r"\bZIMMER_[A-Z0-9_]+\b", path.read_text()))
        unknown = used - KNOWN_ZIMMER_ENV
        assert not unknown, f"{path.name} uses unknown variables {sorted(unknown)}"
