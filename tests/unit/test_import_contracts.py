"""The house's boundaries hold (DESIGN §2, issue 30, docs/architecture.md): `lint-imports` checks
the contracts in pyproject.toml's [tool.importlinter] (services independent; libs/common, the CLI,
the runtime and the simulator import no service; a domain package imports no database, bus or HTTP
library). .ci/run runs it before the tests; this runs it too, so a local `dev.py test` catches a
broken boundary with the import that broke it."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = sorted([*ROOT.glob("libs/*/zimmer_*/__init__.py"), *ROOT.glob("services/*/zimmer_*/__init__.py")])
SERVICES = {"zimmer_backlog", "zimmer_spot_gate", "zimmer_sweeper", "zimmer_alerts", "zimmer_gateway"}


def lint_imports() -> str:
    return shutil.which("lint-imports", path=str(Path(sys.executable).parent)) or "lint-imports"


def test_the_boundaries_hold() -> None:
    run = subprocess.run([lint_imports(), "--no-cache"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "0 broken" in run.stdout, run.stdout


def test_every_zimmer_package_is_a_root_and_every_service_is_independent() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    packages = {p.parent.name for p in PACKAGES}
    assert set(config["root_packages"]) == packages
    [independence] = [c for c in config["contracts"] if c["type"] == "independence"]
    assert set(independence["modules"]) == SERVICES


def test_every_domain_is_checked() -> None:
    """A service's domain, a package (`zimmer_x/domain/`) or a concept's (`zimmer_x/<concept>/domain`,
    package or module), is covered by the purity contract."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    [pure] = [c for c in config["contracts"] if c["name"].startswith("A service's domain is pure")]
    found = [*ROOT.glob("services/*/zimmer_*/domain/__init__.py"), *ROOT.glob("services/*/zimmer_*/*/domain.py"),
             *ROOT.glob("services/*/zimmer_*/*/domain/__init__.py")]
    assert len(found) >= 4
    for path in found:
        parts = path.relative_to(ROOT).with_suffix("").parts[2:]
        module = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        wildcard = ".".join([module.split(".")[0], "*", *module.split(".")[2:]])
        assert module in pure["source_modules"] or wildcard in pure["source_modules"], module


def test_the_check_sees_every_module() -> None:
    """import-linter (grimp) reads only packages with an `__init__.py`: a directory of modules
    without one (a namespace package) would be invisible to every contract."""
    import grimp

    names = [p.parent.name for p in PACKAGES]
    graph = grimp.build_graph(*names, include_external_packages=False, cache_dir=None)
    unseen = []
    for init in PACKAGES:
        for path in init.parent.rglob("*.py"):
            parts = path.relative_to(init.parent.parent).with_suffix("").parts
            module = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            if "__pycache__" not in parts and module not in graph.modules:
                unseen.append(str(path.relative_to(ROOT)))
    assert unseen == [], "modules the boundary check cannot see (a directory without __init__.py?):\n" + \
        "\n".join(unseen)


def test_a_broken_boundary_fails(tmp_path: Path) -> None:
    """The check is not vacuous: a domain module importing sqlalchemy, and a service importing
    another, are both reported."""
    config = (ROOT / "pyproject.toml").read_text()
    tree = tmp_path / "tree"
    for init in PACKAGES:
        package = tree / init.parent.name
        shutil.copytree(init.parent, package, ignore=shutil.ignore_patterns("__pycache__"))
    (tree / "zimmer_backlog" / "domain" / "leak.py").write_text("import sqlalchemy\n")
    (tree / "zimmer_gateway" / "leak.py").write_text("import zimmer_backlog.service\n")
    (tmp_path / "pyproject.toml").write_text(config)
    run = subprocess.run([lint_imports(), "--no-cache"], cwd=tmp_path, capture_output=True, text=True, timeout=120,
                         env={"PYTHONPATH": str(tree), "PATH": "/usr/bin:/bin"})
    assert run.returncode != 0, run.stdout
    assert "zimmer_backlog.domain.leak -> sqlalchemy" in run.stdout, run.stdout
    assert "zimmer_gateway.leak -> zimmer_backlog.service" in run.stdout, run.stdout


def test_the_architecture_picture_names_every_package() -> None:
    """docs/architecture.md's picture mirrors the contracts: every root package in it, every
    service inside the independent group."""
    doc = (ROOT / "docs/architecture.md").read_text()
    picture = doc.split("```mermaid", 1)[1].split("```", 1)[0]
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    assert all(f'{p}["' in picture for p in config["root_packages"]), picture
    group = picture.split("subgraph services", 1)[1].split("\n    end", 1)[0]
    assert {s for s in SERVICES if f'{s}["' in group} == SERVICES, group
