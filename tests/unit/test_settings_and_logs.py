"""Settings refuse placeholder secrets outside development; logs are one JSON object a line."""

from __future__ import annotations

import json
import logging

import pytest

from zimmer_common.logs import JsonFormatter, configure_logging, kv
from zimmer_common.settings import ConfigurationError, Environment, load_settings


@pytest.mark.parametrize("env", ["production", "staging"])
@pytest.mark.parametrize("key", ["", "changeme", "placeholder", "  "])
def test_production_refuses_missing_or_placeholder_api_key(monkeypatch, env: str, key: str) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    monkeypatch.setenv("ZIMMER_ENV", env)
    monkeypatch.setenv("ZIMMER_API_KEY", key)
    monkeypatch.setenv("ZIMMER_OPERATOR_TOKEN", "a-real-operator-token")
    with pytest.raises(ConfigurationError, match="ZIMMER_API_KEY"):
        load_settings()


def test_production_refuses_missing_operator_token(monkeypatch) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    monkeypatch.setenv("ZIMMER_ENV", "production")
    monkeypatch.setenv("ZIMMER_API_KEY", "a-real-fleet-key")
    monkeypatch.delenv("ZIMMER_OPERATOR_TOKEN", raising=False)
    with pytest.raises(ConfigurationError, match="ZIMMER_OPERATOR_TOKEN"):
        load_settings()


@pytest.mark.parametrize("env", ["development", "test"])
def test_development_and_test_start_without_keys(monkeypatch, env: str) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    monkeypatch.setenv("ZIMMER_ENV", env)
    monkeypatch.delenv("ZIMMER_API_KEY", raising=False)
    assert load_settings().env is Environment(env)


def test_secrets_never_appear_in_reprs_or_summaries(monkeypatch) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    monkeypatch.setenv("ZIMMER_ENV", "production")
    monkeypatch.setenv("ZIMMER_API_KEY", "fleet-secret-value")
    monkeypatch.setenv("ZIMMER_OPERATOR_TOKEN", "operator-secret-value")
    monkeypatch.setenv("ZIMMER_DATABASE_URL", "postgresql://zimmer:db-password@db:5432/zimmer")
    settings = load_settings()
    text = repr(settings) + json.dumps(settings.safe_summary())
    for secret in ("fleet-secret-value", "operator-secret-value", "db-password"):
        assert secret not in text
    assert settings.safe_summary()["database"] == "postgresql://zimmer:***@db:5432/zimmer"


def test_unknown_environment_is_a_configuration_error(monkeypatch) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    monkeypatch.setenv("ZIMMER_ENV", "prod")
    with pytest.raises(ConfigurationError, match="env"):
        load_settings()


def test_log_line_is_json_with_service_instance_level(capsys) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    configure_logging("backlog", "backlog-1", "INFO")
    try:
        logging.getLogger("zimmer.test").warning("band is full", extra=kv(band="small", count=3))
        logging.getLogger("zimmer.test").debug("not shown at INFO")
    finally:
        logging.getLogger().handlers[:] = []
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1
    doc = json.loads(lines[0])
    assert {k: doc[k] for k in ("service", "instance", "level", "msg", "band", "count")} == {
        "service": "backlog", "instance": "backlog-1", "level": "WARNING", "msg": "band is full",
        "band": "small", "count": 3}


def test_exceptions_are_kept_in_the_json_line() -> None:
    try:
        raise ValueError("bad")
    except ValueError:
        record = logging.LogRecord("x", logging.ERROR, __file__, 1, "failed", None, exc_info=__import__("sys").exc_info())
    doc = json.loads(JsonFormatter().format(record))
    assert "ValueError: bad" in doc["exc"]
