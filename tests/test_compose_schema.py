"""docker-compose.yml against the Compose Specification's JSON Schema (issue 31 #4), vendored in
tests/fixtures/compose-spec (source, version and licence in its README): offline, with `jsonschema`.
The file is read as Compose reads it (YAML anchors and `<<` merge keys resolved) before validating."""

from __future__ import annotations

import copy
import hashlib
import json
from pathlib import Path

import jsonschema
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
COMPOSE_FILE = ROOT / "docker-compose.yml"
SCHEMA_DIR = ROOT / "tests" / "fixtures" / "compose-spec"
SCHEMA_SHA256 = "d549057ebc2925f39f62799eab0db7b9e2c18b35b6c00595199116da3ed10e64"  # README.md


@pytest.fixture(scope="module")
def validator() -> jsonschema.protocols.Validator:
    raw = (SCHEMA_DIR / "compose-spec.json").read_bytes()
    assert hashlib.sha256(raw).hexdigest() == SCHEMA_SHA256, "the vendored schema changed: update README.md"
    assert (SCHEMA_DIR / "LICENSE").is_file() and "Apache License" in (SCHEMA_DIR / "LICENSE").read_text()
    schema = json.loads(raw)
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    return cls(schema, format_checker=cls.FORMAT_CHECKER)


def _errors(validator: jsonschema.protocols.Validator, document: object) -> list[str]:
    return [f"{'/'.join(map(str, e.absolute_path)) or '(root)'}: {e.message}"
            for e in sorted(validator.iter_errors(document), key=lambda e: list(map(str, e.absolute_path)))]


def test_docker_compose_yml_is_valid_compose(validator: jsonschema.protocols.Validator) -> None:
    compose = yaml.safe_load(COMPOSE_FILE.read_text())
    errors = _errors(validator, compose)
    assert not errors, "docker-compose.yml breaks the Compose Specification:\n" + "\n".join(errors)


@pytest.mark.parametrize("breakage", ["misspelt key", "bad healthcheck", "bad depends_on condition"])
def test_the_schema_catches_mistakes(validator: jsonschema.protocols.Validator, breakage: str) -> None:
    """The validation is not vacuous: a plausible mistake in the real file is refused."""
    compose = copy.deepcopy(yaml.safe_load(COMPOSE_FILE.read_text()))
    gateway = compose["services"]["gateway"]
    if breakage == "misspelt key":
        gateway["healthchek"] = gateway.get("healthcheck", {})
    elif breakage == "bad healthcheck":
        gateway["healthcheck"] = {"test": ["CMD", "true"], "retries": "many", "interval": 5}
    else:
        gateway["depends_on"] = {"backlog": {"condition": "healthy"}}
    assert _errors(validator, compose), f"{breakage} passed the schema"
