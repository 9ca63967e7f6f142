"""Every scenario's short form (issue 28 #4), each on a `zimmer up` stack of its own, exactly as
`zimmer sim --scenario NAME --short` runs it: the invariant table must show no violation.

The stacks start one ahead: while a scenario runs, the next one's stack is coming up in a thread,
so the six cost about their run times plus one start-up, not six start-ups more; and each stops
in a thread while the next one runs. A scenario whose stack is set from the volume's free bytes
(disk-pressure) starts its stack when its turn comes, so the measure is seconds old, not minutes.
"""

from __future__ import annotations

import json
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from zimmer_cli.scenario_cmd import run_scenario
from zimmer_cli.scenario_stack import OwnedStack, free_bytes
from zimmer_sim.scenarios import SCENARIOS

pytestmark = pytest.mark.e2e

ORDER = list(SCENARIOS)


class Prefetch:
    """Owned stacks for the scenarios in ORDER, each started while the one before it runs."""

    def __init__(self, root: Path):
        self.root = root
        self.started: dict[str, tuple[threading.Thread, dict[str, Any]]] = {}
        self.stopping: list[threading.Thread] = []

    def _start(self, name: str) -> None:
        if name in self.started or name not in SCENARIOS:
            return
        scenario, box = SCENARIOS[name], {}  # type: ignore[var-annotated]  # the scenario's scratch box, any values

        def start() -> None:
            try:
                root = Path(tempfile.mkdtemp(prefix=f"{name}-", dir=self.root))
                env = scenario.stack_env(free_bytes(root), True) if scenario.stack_env else {}
                stack = OwnedStack(root, env)
                box["stack"] = stack
                stack.start()
            except BaseException as exc:  # noqa: BLE001 - handed to the test that takes this stack
                box["error"] = exc

        thread = threading.Thread(target=start, name=f"stack-{name}", daemon=True)
        thread.start()
        self.started[name] = (thread, box)

    def take(self, name: str) -> OwnedStack:
        self._start(name)
        thread, box = self.started[name]
        thread.join(300)
        if "error" in box:
            raise box["error"]
        following = ORDER.index(name) + 1
        # Not ahead of a scenario whose marks are set from the volume's free bytes: minutes of the
        # other workers' writes between the measure and the run took the reclaim's margin (CI).
        if following < len(ORDER) and not SCENARIOS[ORDER[following]].measures_free_space:
            self._start(ORDER[following])
        return box["stack"]

    def stop_later(self, stack: OwnedStack) -> None:
        """Stop a finished scenario's stack in a thread, while the next scenario runs."""
        thread = threading.Thread(target=stack.stop, name="stop-stack", daemon=True)
        thread.start()
        self.stopping.append(thread)

    def stop_all(self) -> None:
        for thread in self.stopping:
            thread.join(120)
        for thread, box in self.started.values():  # a stack its test never took, or one left running
            thread.join(300)
            if "stack" in box:
                box["stack"].stop()


@pytest.fixture(scope="module")
def stacks(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Prefetch]:
    prefetch = Prefetch(tmp_path_factory.mktemp("scenarios"))
    try:
        yield prefetch
    finally:
        prefetch.stop_all()


@pytest.mark.timeout(600)
@pytest.mark.parametrize("name", ORDER)
async def test_the_short_form_holds_every_invariant(name: str, stacks: Prefetch) -> None:
    stack = stacks.take(name)
    try:
        result = await run_scenario(name, short=True, minutes=None, seed=7, stack=stack, progress=False)
    finally:
        stacks.stop_later(stack)
    failing = {k: v for k, v in result["invariants"].items() if v["violations"]}
    assert result["passed"] and not failing, (
        f"{name}:\n{result['table']}\n{json.dumps(failing, indent=1, default=str)}\nlogs: {stack.data / 'logs'}")
    checked = {k: v["checks"] for k, v in result["invariants"].items()}
    assert all(n > 0 for n in checked.values()), f"an invariant that was never checked proves nothing: {checked}"
