"""Alertmanager wired in (issue 31 #1): deploy/alertmanager.yml is a valid configuration that routes
each severity the rules and the alerts service use, compose runs it with these files, Prometheus
sends its alerts there, and — end to end, with Debian's real `prometheus` and `prometheus-alertmanager`
— a rule of deploy/prometheus/alerts.yml fires against a fake scrape target, arrives at Alertmanager
(GET /api/v2/alerts) and is delivered to the webhook receiver its severity routes to.

The real run uses copies of the deployed files changed only where a test must: the receivers' URLs
point at a webhook server this test runs, the waits and intervals are seconds, and the scrape target
is a local fake exporting the series that make the rules fire."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from zimmer_cli.embedded import free_port

ROOT = Path(__file__).resolve().parents[1]
COMPOSE_FILE = ROOT / "docker-compose.yml"
PROMETHEUS_FILE = ROOT / "deploy" / "prometheus.yml"
ALERTS_FILE = ROOT / "deploy" / "prometheus" / "alerts.yml"
ALERTMANAGER_FILE = ROOT / "deploy" / "alertmanager.yml"

# Severities the alerts service gives its pages (zimmer_common.contracts.alerts.Level).
ALERTS_SERVICE_SEVERITIES = {"warning", "error"}
# Which receiver each severity must reach.
RECEIVER_OF = {"critical": "critical", "error": "critical", "warning": "warning"}

WAIT_SECONDS = 60.0


def _binary(*names: str) -> str:
    for name in names:
        found = shutil.which(name)
        if found:
            return found
    if os.environ.get("ZIMMER_REQUIRE_PROMTOOL"):  # CI (.ci/run) installs them and sets this
        pytest.fail(f"{names[0]} is required here and is not on PATH", pytrace=False)
    pytest.skip(f"{names[0]} not installed (Debian: apt-get install prometheus prometheus-alertmanager)")


def _rules() -> list[dict[str, Any]]:
    data = yaml.safe_load(ALERTS_FILE.read_text())
    return [rule for group in data["groups"] for rule in group["rules"]]


def _wait(what: str, check: Callable[[], Any], *, timeout: float = WAIT_SECONDS,
          logs: Callable[[], str] = lambda: "") -> Any:
    """Poll `check` until it returns something truthy; fail saying what never happened."""
    deadline = time.monotonic() + timeout
    last_error: Exception | None = None
    while time.monotonic() < deadline:
        try:
            result = check()
            if result:
                return result
        except (httpx.HTTPError, ValueError, KeyError) as exc:
            last_error = exc
        time.sleep(0.25)
    pytest.fail(f"timed out after {timeout:.0f}s waiting for {what}"
                + (f" (last error: {last_error!r})" if last_error else "") + f"\n{logs()}", pytrace=False)


# ------------------------------------------------------------------------- static checks


def test_alertmanager_config_passes_amtool() -> None:
    run = subprocess.run([_binary("amtool"), "check-config", str(ALERTMANAGER_FILE)], capture_output=True, text=True,
                         timeout=30)
    assert run.returncode == 0, run.stdout + run.stderr


def test_every_severity_routes_to_its_receiver() -> None:
    """Every severity a rule carries, and every level the alerts service pages with, has its route."""
    used = {rule["labels"]["severity"] for rule in _rules()} | ALERTS_SERVICE_SEVERITIES
    assert used <= set(RECEIVER_OF), f"severities without an expected receiver here: {used - set(RECEIVER_OF)}"
    config = yaml.safe_load(ALERTMANAGER_FILE.read_text())
    routed = {m for route in config["route"].get("routes", []) for m in route.get("matchers", [])}
    for severity in used:
        assert f'severity="{severity}"' in routed, f"no route for severity {severity!r}"
        run = subprocess.run([_binary("amtool"), "config", "routes", "test", f"--config.file={ALERTMANAGER_FILE}",
                              "alertname=X", f"severity={severity}"], capture_output=True, text=True, timeout=30)
        assert run.returncode == 0, run.stdout + run.stderr
        assert run.stdout.split() == [RECEIVER_OF[severity]], f"{severity} routes to {run.stdout.strip()!r}"
    for receiver in config["receivers"]:
        assert receiver.get("webhook_configs"), f"receiver {receiver['name']} has no webhook"


def test_inhibition_of_warnings_by_a_critical_of_the_same_alert() -> None:
    config = yaml.safe_load(ALERTMANAGER_FILE.read_text())
    rules = config.get("inhibit_rules") or []
    assert any('severity="warning"' in r.get("target_matchers", []) and "alertname" in r.get("equal", [])
               and any("critical" in m for m in r.get("source_matchers", [])) for r in rules), rules


def test_prometheus_sends_to_the_compose_alertmanager() -> None:
    prometheus = yaml.safe_load(PROMETHEUS_FILE.read_text())
    targets = [t for am in prometheus["alerting"]["alertmanagers"] for sc in am["static_configs"]
               for t in sc["targets"]]
    services = yaml.safe_load(COMPOSE_FILE.read_text())["services"]
    am = services["alertmanager"]
    assert am["image"].startswith("prom/alertmanager:v") and am["image"].split(":v")[1][0].isdigit(), \
        "pin the Alertmanager version"
    assert targets == ["alertmanager:9093"], targets
    mounts = {str(v).split(":")[1]: str(v).split(":")[0] for v in am.get("volumes") or []}
    assert (ROOT / mounts["/etc/alertmanager/alertmanager.yml"]).resolve() == ALERTMANAGER_FILE.resolve()
    assert "--config.file=/etc/alertmanager/alertmanager.yml" in am["command"]
    assert "/-/healthy" in " ".join(am["healthcheck"]["test"])
    deps = services["prometheus"]["depends_on"]
    assert deps["alertmanager"]["condition"] == "service_healthy", deps
    alerts_env = services["alerts"]["environment"]
    assert alerts_env.get("ZIMMER_ALERTMANAGER_URL") == "http://alertmanager:9093"


def test_prometheus_config_passes_promtool_with_alerting() -> None:
    run = subprocess.run([_binary("promtool"), "check", "config", "--syntax-only", str(PROMETHEUS_FILE)],
                         capture_output=True, text=True, timeout=30)
    assert run.returncode == 0, run.stdout + run.stderr


# ------------------------------------------------------------------------- end to end

# What the fake target exports: two series that make two rules fire, one of each routed severity.
FAKE_METRICS = """\
# TYPE zimmer_job_last_run_failed gauge
zimmer_job_last_run_failed{service="backlog",job="liveness_sweep"} 1
# TYPE zimmer_dependency_up gauge
zimmer_dependency_up{dependency="database"} 0
"""
FIRING = {"ZimmerJobFailures": "warning", "ZimmerDependencyDown": "critical"}


class _Recorder(BaseHTTPRequestHandler):
    """The fake scrape target (GET /metrics) and the webhook receiver (POST /<receiver>)."""

    received: list[tuple[str, dict[str, Any]]]

    def do_GET(self) -> None:  # noqa: N802 - http.server's naming
        body = FAKE_METRICS.encode()
        self.send_response(200 if self.path == "/metrics" else 404)
        self.send_header("Content-Type", "text/plain; version=0.0.4")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self) -> None:  # noqa: N802 - http.server dispatches on this name
        length = int(self.headers.get("Content-Length") or 0)
        self.server.received.append((self.path, json.loads(self.rfile.read(length) or b"{}")))  # type: ignore[attr-defined]  # an attribute the test adds to the server
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *_args: Any) -> None:
        pass


@pytest.fixture
def http_server() -> Iterator[tuple[str, list[tuple[str, dict[str, Any]]]]]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Recorder)
    server.received = []  # type: ignore[attr-defined]  # an attribute the test adds to the server
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"127.0.0.1:{server.server_address[1]}", server.received  # type: ignore[attr-defined]  # an attribute the test adds to the server
    finally:
        server.shutdown()
        server.server_close()


class _Process:
    def __init__(self, argv: list[str], log: Path):
        self.log = log
        self._out = log.open("wb")
        self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=self._out, stderr=subprocess.STDOUT)

    def tail(self) -> str:
        self._out.flush()
        text = self.log.read_text(errors="replace")
        return f"--- {self.log.name} (last lines) ---\n" + "\n".join(text.splitlines()[-30:])

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)
        self._out.close()


def _fast_routes(route: dict[str, Any]) -> None:
    for key in ("group_wait", "group_interval"):
        if key in route or key == "group_wait":
            route[key] = "1s"
    for child in route.get("routes", []):
        _fast_routes(child)


@pytest.mark.network  # Prometheus and Alertmanager, a webhook on 127.0.0.1
def test_a_rule_fires_reaches_alertmanager_and_its_webhook(tmp_path: Path, http_server) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    prometheus_bin = _binary("prometheus")
    alertmanager_bin = _binary("prometheus-alertmanager", "alertmanager")
    local, received = http_server

    # Alertmanager: the deployed file, with the receivers pointing here and waits of a second.
    am_config = yaml.safe_load(ALERTMANAGER_FILE.read_text())
    for receiver in am_config["receivers"]:
        for hook in receiver["webhook_configs"]:
            hook["url"] = f"http://{local}/{receiver['name']}"
    _fast_routes(am_config["route"])
    (tmp_path / "alertmanager.yml").write_text(yaml.safe_dump(am_config))
    am_port = free_port()
    am_url = f"http://127.0.0.1:{am_port}"
    am = _Process([alertmanager_bin, f"--config.file={tmp_path / 'alertmanager.yml'}",
                   f"--storage.path={tmp_path / 'am-data'}", f"--web.listen-address=127.0.0.1:{am_port}",
                   "--cluster.listen-address="], tmp_path / "alertmanager.log")

    # The deployed rules, those that fire here without waiting (`for:` of a second).
    alerts = yaml.safe_load(ALERTS_FILE.read_text())
    for group in alerts["groups"]:
        group["interval"] = "1s"
        for rule in group["rules"]:
            if rule["alert"] in FIRING:
                assert rule["labels"]["severity"] == FIRING[rule["alert"]], rule
                rule["for"] = "1s"
    (tmp_path / "alerts.yml").write_text(yaml.safe_dump(alerts))

    # Prometheus: the deployed file's alerting and rule_files shape, intervals of a second, the
    # fake target as one Zimmer job (its `job` label is what the rules group by).
    prom_config = yaml.safe_load(PROMETHEUS_FILE.read_text())
    assert len(prom_config["rule_files"]) == 1 and len(prom_config["alerting"]["alertmanagers"]) == 1
    prom_config["global"].update(scrape_interval="1s", scrape_timeout="1s", evaluation_interval="1s")
    prom_config["rule_files"] = [str(tmp_path / "alerts.yml")]
    prom_config["alerting"]["alertmanagers"][0]["static_configs"] = [{"targets": [f"127.0.0.1:{am_port}"]}]
    prom_config["scrape_configs"] = [{"job_name": "zimmer-backlog", "static_configs": [{"targets": [local]}]}]
    (tmp_path / "prometheus.yml").write_text(yaml.safe_dump(prom_config))
    prom_port = free_port()
    prom_url = f"http://127.0.0.1:{prom_port}"
    prom = _Process([prometheus_bin, f"--config.file={tmp_path / 'prometheus.yml'}",
                     f"--storage.tsdb.path={tmp_path / 'prom-data'}", f"--web.listen-address=127.0.0.1:{prom_port}"],
                    tmp_path / "prometheus.log")

    def logs() -> str:
        return f"{prom.tail()}\n{am.tail()}\nwebhook received: {received!r}"

    try:
        for name, proc, url in (("alertmanager", am, am_url), ("prometheus", prom, prom_url)):
            def ready(proc: _Process = proc, url: str = url, name: str = name) -> bool:
                if proc.proc.poll() is not None:
                    pytest.fail(f"{name} exited with {proc.proc.returncode}\n{logs()}", pytrace=False)
                return httpx.get(f"{url}/-/ready", timeout=2).status_code == 200
            _wait(f"{name} to be ready", ready, logs=logs)

        def firing_in_prometheus() -> bool:
            data = httpx.get(f"{prom_url}/api/v1/alerts", timeout=2).json()["data"]["alerts"]
            return {a["labels"]["alertname"] for a in data if a["state"] == "firing"} >= set(FIRING)
        _wait(f"Prometheus to fire {sorted(FIRING)}", firing_in_prometheus, logs=logs)

        def at_alertmanager() -> list[dict[str, Any]]:
            data = httpx.get(f"{am_url}/api/v2/alerts", timeout=2).json()
            return data if {a["labels"]["alertname"] for a in data} >= set(FIRING) else []
        arrived = _wait("the alerts to arrive at Alertmanager (GET /api/v2/alerts)", at_alertmanager, logs=logs)
        by_name = {a["labels"]["alertname"]: a for a in arrived}
        for name, severity in FIRING.items():
            alert = by_name[name]
            assert alert["labels"]["severity"] == severity
            assert alert["labels"]["stack"] == "zimmer"  # Prometheus' external_labels
            assert alert["status"]["state"] == "active", alert
            assert [r["name"] for r in alert["receivers"]] == [RECEIVER_OF[severity]], alert["receivers"]
        assert by_name["ZimmerJobFailures"]["labels"]["exported_job"] == "liveness_sweep"
        assert by_name["ZimmerDependencyDown"]["labels"]["job"] == "zimmer-backlog"

        def delivered() -> dict[str, set[str]]:
            got: dict[str, set[str]] = {}
            for path, body in list(received):
                got.setdefault(path, set()).update(a["labels"]["alertname"] for a in body.get("alerts", [])
                                                   if a["status"] == "firing")
            want = {f"/{RECEIVER_OF[sev]}": name for name, sev in FIRING.items()}
            return got if all(name in got.get(path, set()) for path, name in want.items()) else {}
        got = _wait("the webhook to receive each alert at its severity's receiver", delivered, logs=logs)
        assert "ZimmerJobFailures" not in got.get("/critical", set()), got
        assert "ZimmerDependencyDown" not in got.get("/warning", set()), got

        # Inhibition: a critical silences the warning of the same alert on the same target.
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        same = {"alertname": "ZimmerInhibitionProbe", "job": "zimmer-backlog", "instance": local}
        posted = httpx.post(f"{am_url}/api/v2/alerts", timeout=5, json=[
            {"labels": {**same, "severity": "critical"}, "startsAt": now},
            {"labels": {**same, "severity": "warning"}, "startsAt": now},
        ])
        assert posted.status_code == 200, posted.text

        def warning_state() -> dict[str, Any] | None:
            data = httpx.get(f"{am_url}/api/v2/alerts", params={"filter": 'alertname="ZimmerInhibitionProbe"'},
                             timeout=2).json()
            states = {a["labels"]["severity"]: a["status"] for a in data}
            return states if states.get("warning", {}).get("state") == "suppressed" else None
        states = _wait("the probe's warning to be inhibited by its critical", warning_state, logs=logs)
        assert states["critical"]["state"] == "active", states
        assert states["warning"]["inhibitedBy"], states
    finally:
        prom.stop()
        am.stop()
