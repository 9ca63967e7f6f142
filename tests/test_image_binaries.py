"""The image contains what the services run (issue 31 #2).

Every program the code in services/ and libs/common starts — through the bounded runner
(`zimmer_common.bounded.run_bounded`) or any subprocess/exec call — is found by parsing the source
with `ast` and resolving the call's program: a string literal, a parameter's default, a local or
`self.` attribute assigned from those, or `shutil.which("name")`. Each must be installed by the
runtime stage of deploy/Dockerfile (`apt-get install`), come with the python base image, or be listed
below as optional with the reason (its caller copes with its absence). A call whose program cannot
be resolved fails too: make it resolvable (a literal or a default) rather than hide it.
"""

from __future__ import annotations

import ast
import shlex
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOCKERFILE = ROOT / "deploy" / "Dockerfile"
SCANNED = (ROOT / "services", ROOT / "libs" / "common")

# Calls that start a program whose argv (or program) is the first positional argument.
ARGV_CALLS = {"run_bounded", "subprocess.run", "subprocess.Popen", "subprocess.call", "subprocess.check_call",
              "subprocess.check_output", "asyncio.create_subprocess_exec", "create_subprocess_exec"}
# ... whose first argument is a shell command line (its first word is the program).
SHELL_CALLS = {"asyncio.create_subprocess_shell", "create_subprocess_shell", "os.system", "os.popen"}
# ... and the exec/spawn family, whose first argument is the program itself.
EXEC_PREFIXES = ("os.exec", "os.spawn", "os.posix_spawn")

# The runner itself executes whatever argv its caller gives it: its call sites are what count.
RUNNERS = {Path("libs/common/zimmer_common/bounded.py")}

# In python:3.11-slim already.
BASE_IMAGE = {"python", "python3", "sh", "env"}
# Debian package of a program, where the names differ.
PACKAGE_OF: dict[str, str] = {}
# Programs the code starts only when present, coping without them (not installed on purpose).
OPTIONAL = {
    # clones/compose.py: `docker compose down` of a clone's compose project, run only if `docker` is
    # on PATH (else the teardown reports "no_docker"): the image has no Docker socket to talk to.
    "docker": "the sweeper's compose teardown skips a host without docker",
}


@dataclass(frozen=True)
class Invocation:
    path: Path
    line: int
    call: str
    programs: frozenset[str]  # empty: could not be resolved

    def __str__(self) -> str:
        return f"{self.path}:{self.line} {self.call}(...)"


def _dotted(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{_dotted(node.value)}.{node.attr}"
    return ""


class _Scanner(ast.NodeVisitor):
    def __init__(self, path: Path, tree: ast.Module):
        self.path = path
        self.tree = tree
        self.scopes: list[ast.AST] = [tree]  # module, classes and functions, innermost last
        self.found: list[Invocation] = []

    # ---- scopes
    def _enter(self, node: ast.AST) -> None:
        self.scopes.append(node)
        self.generic_visit(node)
        self.scopes.pop()

    visit_FunctionDef = visit_AsyncFunctionDef = visit_ClassDef = _enter  # noqa: N815 - ast.NodeVisitor dispatches on these names

    # ---- calls
    def visit_Call(self, node: ast.Call) -> None:
        name = _dotted(node.func)
        short = name.rsplit(".", 1)[-1]
        first = node.args[0] if node.args else None
        if name in ARGV_CALLS or short == "run_bounded":
            programs = self._argv_program(first, node)
        elif name in SHELL_CALLS:
            programs = {p.split()[0] for p in self._strings(first) if p.split()}
        elif name.startswith(EXEC_PREFIXES):
            programs = self._strings(node.args[1] if name.startswith("os.spawn") and len(node.args) > 1 else first)
        else:
            self.generic_visit(node)
            return
        self.found.append(Invocation(self.path, node.lineno, name, frozenset(Path(p).name for p in programs)))
        self.generic_visit(node)

    def _argv_program(self, first: ast.AST | None, call: ast.Call) -> set[str]:
        if first is None:
            return set()
        if isinstance(first, ast.Starred):  # create_subprocess_exec(*argv)
            return self._argv_program(first.value, call)
        if isinstance(first, (ast.List, ast.Tuple)) and first.elts:
            head = first.elts[0]
            if isinstance(head, ast.Starred):
                return self._argv_program(head.value, call)
            return self._strings(head)
        if isinstance(first, ast.Name):
            # argv built earlier in the function: the program is its first element.
            for value in self._assigned(first.id):
                if isinstance(value, (ast.List, ast.Tuple)):
                    return self._argv_program(value, call)
        return self._strings(first)

    # ---- resolving an expression to the program names it can hold
    def _strings(self, node: ast.AST | None, depth: int = 0) -> set[str]:
        if node is None or depth > 8:
            return set()
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return {node.value}
        if isinstance(node, ast.BoolOp):
            return set().union(*(self._strings(v, depth + 1) for v in node.values))
        if isinstance(node, ast.IfExp):
            return self._strings(node.body, depth + 1) | self._strings(node.orelse, depth + 1)
        if isinstance(node, ast.Call) and _dotted(node.func) in ("shutil.which", "which") and node.args:
            return self._strings(node.args[0], depth + 1)
        if isinstance(node, ast.Name):
            out: set[str] = set()
            for value in [*self._defaults(node.id), *self._assigned(node.id)]:
                out |= self._strings(value, depth + 1)
            return out
        if isinstance(node, ast.Attribute) and _dotted(node.value) == "self":
            out = set()
            for method, value in self._self_assigned(node.attr):
                saved, self.scopes = self.scopes, [*self.scopes[:-1], method]
                try:
                    out |= self._strings(value, depth + 1)
                finally:
                    self.scopes = saved
            return out
        return set()

    def _function(self) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
        for scope in reversed(self.scopes):
            if isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef)):
                return scope
        return None

    def _defaults(self, name: str) -> list[ast.AST]:
        fn = self._function()
        if fn is None:
            return []
        a = fn.args
        positional = [*a.posonlyargs, *a.args]
        pairs = list(zip(positional[len(positional) - len(a.defaults):], a.defaults, strict=True))
        pairs += [(arg, d) for arg, d in zip(a.kwonlyargs, a.kw_defaults, strict=True) if d is not None]
        return [default for arg, default in pairs if arg.arg == name]

    def _assigned(self, name: str) -> list[ast.AST]:
        scope = self._function() or self.tree
        values: list[ast.AST] = []
        for node in ast.walk(scope):
            assigned = isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets)
            annotated = (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.target.id == name
                         and node.value is not None)
            if assigned or annotated:
                values.append(node.value)
        if scope is not self.tree:  # module constants too
            for node in self.tree.body:
                if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
                    values.append(node.value)
        return values

    def _self_assigned(self, attr: str) -> list[tuple[ast.AST, ast.AST]]:
        cls = next((s for s in reversed(self.scopes) if isinstance(s, ast.ClassDef)), None)
        if cls is None:
            return []
        out = []
        for method in cls.body:
            if not isinstance(method, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for node in ast.walk(method):
                if isinstance(node, ast.Assign):
                    for target in node.targets:
                        if isinstance(target, ast.Attribute) and _dotted(target.value) == "self" and target.attr == attr:
                            out.append((method, node.value))
        # A dataclass-style field with a default.
        for node in cls.body:
            if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.target.id == attr \
                    and node.value is not None:
                out.append((cls, node.value))
        return out


def invocations(roots: tuple[Path, ...] = SCANNED, base: Path = ROOT) -> list[Invocation]:
    found: list[Invocation] = []
    for root in roots:
        for path in sorted(root.rglob("*.py")):
            rel = path.relative_to(base)
            if rel in RUNNERS or ".venv" in rel.parts:
                continue
            scanner = _Scanner(rel, ast.parse(path.read_text(), filename=str(path)))
            scanner.visit(scanner.tree)
            found.extend(scanner.found)
    return found


def runtime_packages(dockerfile: Path = DOCKERFILE) -> set[str]:
    """The packages `apt-get install` installs in the Dockerfile's last stage (the runtime)."""
    text = dockerfile.read_text().replace("\\\n", " ")
    lines = [line.strip() for line in text.splitlines() if line.strip() and not line.strip().startswith("#")]
    last_from = max(i for i, line in enumerate(lines) if line.upper().startswith("FROM "))
    assert " AS RUNTIME" in lines[last_from].upper(), f"the last stage is not the runtime one: {lines[last_from]}"
    packages: set[str] = set()
    for line in lines[last_from:]:
        if not line.upper().startswith("RUN "):
            continue
        for command in line[4:].replace("&&", ";").split(";"):
            words = shlex.split(command)
            if words[:2] == ["apt-get", "install"]:
                packages |= {w for w in words[2:] if not w.startswith("-")}
    return packages


def missing_binaries(found: list[Invocation], packages: set[str]) -> list[str]:
    problems = []
    for inv in found:
        if not inv.programs:
            problems.append(f"{inv}: cannot tell which program it runs (use a literal or a parameter default)")
        for program in sorted(inv.programs):
            if program in BASE_IMAGE or program in OPTIONAL:
                continue
            if PACKAGE_OF.get(program, program) not in packages:
                problems.append(f"{inv} runs {program!r}, which deploy/Dockerfile's runtime stage does not install")
    return problems


# ----------------------------------------------------------------------------------- tests


def test_every_program_the_code_runs_is_in_the_image() -> None:
    found = invocations()
    programs = {p for inv in found for p in inv.programs}
    # The scan sees the known ones (if it stopped seeing them, it would pass for the wrong reason).
    assert {"git", "docker"} <= programs, f"the scan found only {sorted(programs)} in {[str(i) for i in found]}"
    assert not missing_binaries(found, runtime_packages()), "\n".join(missing_binaries(found, runtime_packages()))


def test_the_runtime_stage_installs_git_lean() -> None:
    packages = runtime_packages()
    assert "git" in packages, packages
    text = DOCKERFILE.read_text().replace("\\\n", " ")
    install = next(line for line in text.splitlines() if "apt-get install" in line)
    assert "--no-install-recommends" in install and "rm -rf /var/lib/apt/lists/*" in install, install


def test_a_new_program_call_without_installing_it_fails(tmp_path: Path) -> None:
    """The check itself: a call to a program the image lacks is found (through each way the code
    names programs) and reported."""
    pkg = tmp_path / "services" / "newsvc"
    pkg.mkdir(parents=True)
    (pkg / "tool.py").write_text('''
import asyncio, shutil, subprocess
from zimmer_common.bounded import run_bounded

RSYNC = "rsync"

class Archiver:
    def __init__(self, binary: str = "zstd"):
        self.binary = binary

    async def pack(self) -> None:
        await run_bounded([self.binary, "-q"], timeout=5)

async def sync(*, tool: str | None = None) -> None:
    binary = tool or shutil.which("rclone")
    await run_bounded([binary, "sync"], timeout=5)
    argv = [RSYNC, "-a"]
    await run_bounded(argv, timeout=5)
    await asyncio.create_subprocess_exec("curl", "-s")
    subprocess.run(["git", "status"], check=True)
    await run_bounded([compute_name(), "x"], timeout=5)
''')
    found = invocations((tmp_path / "services",), base=tmp_path)
    assert {p for inv in found for p in inv.programs} == {"zstd", "rclone", "rsync", "curl", "git"}
    problems = missing_binaries(found, runtime_packages())
    for program in ("zstd", "rclone", "rsync", "curl"):
        assert any(f"runs {program!r}" in p for p in problems), (program, problems)
    assert not any("runs 'git'" in p for p in problems), problems  # installed
    assert any("cannot tell which program" in p for p in problems), problems
