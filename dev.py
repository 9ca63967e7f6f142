#!/usr/bin/env python3
"""The README's commands, needing nothing but Python 3.11 (no make, no Docker, no root):

    python3 dev.py run     # start the whole system on embedded PostgreSQL + NATS
    python3 dev.py test    # run the whole test suite, on one pytest-xdist worker per core and one more
    python3 dev.py test --fast   # only the unit layer (-m unit: no server, no socket; about a minute)
    python3 dev.py lint    # ruff ([tool.ruff]), then the boundaries between packages (lint-imports; also a test)
    python3 dev.py bench   # run the benchmarks

Each creates `.venv` and installs the project into it when missing or when pyproject.toml
changed, then replaces itself with the real command (so Ctrl-C reaches it directly).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent
VENV = ROOT / ".venv"
BIN = VENV / "bin"
STAMP = VENV / ".zimmer-installed"
COMMANDS = {
    "run": [str(BIN / "zimmer"), "up"],
    "test": [str(BIN / "pytest")],
    "lint": [str(BIN / "lint-imports"), "--no-cache"],  # [tool.importlinter] in pyproject.toml, after RUFF
    "bench": [str(BIN / "python"), "-m", "bench.run"],
}
RUFF = [str(BIN / "ruff"), "check", "."]  # [tool.ruff] in pyproject.toml: the whole tree


def parallel(args: list[str]) -> list[str]:
    """The suite on pytest-xdist workers, unless the arguments choose otherwise (`-n`, `-p no:xdist`).

    One worker more than the cores: many tests wait on real time (a fleet run of a fixed length, a
    server's restart), so the cores have room beside them; measured on 2 cores, 2 workers took 15
    minutes and 3 took 12 ½. `loadfile` keeps a file on one worker (the scenarios start the next
    stack while one runs; the schemathesis run shares one stack), and `--no-loadscope-reorder`
    hands the files out in collection order, where tests/conftest.py puts those that take minutes
    first: by default xdist hands out the files with the most tests first, so the long single-test
    files started last. Not `load`: it splits those modules (16 minutes); not `loadgroup`: with
    pytest 9.2 it silently stops grouping (pytest-dev/pytest-xdist#1386)."""
    if os.environ.get("ZIMMER_TEST_NATS_URL") or os.environ.get("ZIMMER_TEST_BACKEND") == "containers":
        return args  # one shared NATS server, whose ZIMMER_* streams each test deletes: one process at a time
    chosen = any(a == "-n" or a.startswith(("-n", "--numprocesses")) for a in args) or "no:xdist" in args
    return args if chosen else ["-n", str((os.cpu_count() or 1) + 1), "--dist", "loadfile", "--no-loadscope-reorder", *args]


def ensure_python_311() -> None:
    if sys.version_info[:2] == (3, 11):
        return
    other = shutil.which("python3.11")
    if other:
        os.execv(other, [other, *sys.argv])
    sys.exit(f"Zimmer needs Python 3.11; this is {sys.version.split()[0]} and no python3.11 is on PATH")


def ensure_installed() -> None:
    wanted = hashlib.sha256((ROOT / "pyproject.toml").read_bytes()).hexdigest()
    if (BIN / "python").exists() and STAMP.exists() and STAMP.read_text() == wanted:
        return
    if not (BIN / "python").exists():
        print("creating .venv", flush=True)
        venv.create(VENV, with_pip=True)
    print("installing Zimmer and its dependencies into .venv (first run takes a minute or two)", flush=True)
    pip = [str(BIN / "python"), "-m", "pip", "--disable-pip-version-check"]
    subprocess.run([*pip, "install", "--quiet", "--upgrade", "pip"], check=True)
    subprocess.run([*pip, "install", "--quiet", "-e", f"{ROOT}[test]"], check=True)
    STAMP.write_text(wanted)


# Real peers the tests drive, from Debian (no downloads: there is no internet here): the browser
# for the operator pages, Alertmanager for the alerts sink, promtool for the alert rules.
TEST_PEERS = {"chromium": "chromium", "prometheus-alertmanager": "prometheus-alertmanager",
              "promtool": "prometheus"}


def ensure_test_peers() -> None:
    """Install the missing ones when we may; otherwise their tests fail (never skip) saying so."""
    missing = [pkg for binary, pkg in TEST_PEERS.items() if not shutil.which(binary)]
    if not missing:
        return
    if shutil.which("apt-get") and os.geteuid() == 0:
        print(f"installing Debian's {', '.join(missing)} for the tests", flush=True)
        if subprocess.run(["apt-get", "install", "-y", "-q", *missing], stdout=subprocess.DEVNULL).returncode == 0:
            return
    print(f"missing {', '.join(missing)}: the tests that drive them will fail; install Debian's packages",
          file=sys.stderr, flush=True)


def main() -> None:
    if len(sys.argv) < 2 or sys.argv[1] not in COMMANDS:
        sys.exit(f"usage: python3 dev.py {{{'|'.join(COMMANDS)}}} [args...]")
    ensure_python_311()
    ensure_installed()
    if sys.argv[1] == "test":
        ensure_test_peers()
    os.chdir(ROOT)
    args = sys.argv[2:]
    if sys.argv[1] == "lint" and subprocess.run(RUFF).returncode != 0:
        sys.exit(1)
    if sys.argv[1] == "test" and "--fast" in args:  # the unit layer: tests/conftest.py marks it
        args = ["-m", "unit", *(a for a in args if a != "--fast")]
    if sys.argv[1] == "test":
        args = parallel(args)
    argv = COMMANDS[sys.argv[1]] + args
    os.execv(argv[0], argv)


if __name__ == "__main__":
    main()
