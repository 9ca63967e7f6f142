"""The sweeper's disk scans (issue 16), group `sweeper_disk`: what reading a host's roots costs
against walking them bare, on real directories in the default temporary directory.

- transcript classification: a transcripts root of 100,000 directories (`--quick`: 10,000) against
  a clones base of 10,000 live clones (1,000): each live clone's own transcript, 2,000 `-<subdir>`
  extensions of them, 80,000 of gone clones, 6,000 of `/tmp` cwds, 2,000 unknown; every directory
  holds a `<session>.jsonl`, one in ten a `<session>/subagents/agent-1.jsonl` too. Subject: what
  the orphan sweep does between asking spot-gate and deleting (`transcripts.TranscriptSweep`):
  list the clones base (`clone_working_dirs`), build the liveness (`liveness`), list and judge the
  root reading the newest mtime of every orphan candidate (`classify_root`) with no early stop
  (every candidate read to its last file: production's case, 99 % orphaned and old). Baseline in
  the same rounds, the order alternating: a bare `os.scandir` walk of the same tree (every
  directory listed, names and `is_dir` only). Target ≤ 1.5×. A second entry isolates the names:
  the root listed and every name judged, against the root listed bare.
- orphan clone scan (helper-2's `orphans.py`, the part that reads the disk): `list_root` of the
  10,000-directory clones base (an lstat an entry, for the age), `aged_clone_directories` and
  `choose_orphans` (the ownership answers made up in-process: the RPCs to spot-gate are not in
  it). Baseline: a bare `os.scandir` listing of the same base.
- RSS: the bench process's peak resident set during one extra round of each pass (sampled every
  2 ms on a thread, outside the timed rounds), against its RSS before the pass.

Needs no embedded server. See bench/README.md, *Sweeper disk scans*.
"""

from __future__ import annotations

import math
import os
import posixpath
import random
import shutil
import statistics
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import psutil

from bench.harness import BenchContext, Entry, Series, Sizes, rss_mb

GROUP = "sweeper_disk"
SEED = 20_261_201
SUBAGENT_EVERY = 10


@dataclass(frozen=True)
class Shape:
    transcripts: int
    live: int
    extensions: int
    ephemeral: int
    unknown: int

    @property
    def gone(self) -> int:
        return self.transcripts - self.live - self.extensions - self.ephemeral - self.unknown


FULL_SHAPE = Shape(transcripts=100_000, live=10_000, extensions=2_000, ephemeral=6_000, unknown=2_000)
QUICK_SHAPE = Shape(transcripts=10_000, live=1_000, extensions=200, ephemeral=600, unknown=200)


@dataclass
class Tree:
    top: str
    clones: str
    transcripts: str
    live: list[str]


def _touch(path: str) -> None:
    os.close(os.open(path, os.O_CREAT | os.O_WRONLY, 0o644))


def build(shape: Shape) -> Tree:
    """The clones base and the transcripts root, as the derivation names them."""
    from zimmer_sweeper.transcripts.domain import transcript_name

    rng = random.Random(SEED)
    top = tempfile.mkdtemp(prefix="zimmer-bench-disk-")
    clones = posixpath.join(top, ".zimmer", "clones")
    transcripts = posixpath.join(top, "claude", "projects")
    os.makedirs(clones)
    os.makedirs(transcripts)
    live = [posixpath.join(clones, f"zimmer-main-{1785661439 + i}-{rng.getrandbits(32):08x}") for i in range(shape.live)]
    for clone in live:
        os.mkdir(clone)
        _touch(posixpath.join(clone, ".mcp.json"))
    names = [transcript_name(c) for c in live]
    names += [transcript_name(live[i % shape.live]) + f"-app{i}" for i in range(shape.extensions)]
    names += [transcript_name(posixpath.join(clones, f"zimmer-main-{1700000000 + i}-{rng.getrandbits(32):08x}"))
              for i in range(shape.gone)]
    names += [f"-tmp-headless-inference-{rng.getrandbits(48):012x}" for _ in range(shape.ephemeral)]
    names += [f"-srv-app{i}" for i in range(shape.unknown)]
    rng.shuffle(names)
    for i, name in enumerate(names):
        path = posixpath.join(transcripts, name)
        os.mkdir(path)
        _touch(posixpath.join(path, "0b6e0c1e-8a4f-4c62-9d1e-5f3a2b7c9e10.jsonl"))
        if i % SUBAGENT_EVERY == 0:
            os.makedirs(posixpath.join(path, "0b6e0c1e", "subagents"))
            _touch(posixpath.join(path, "0b6e0c1e", "subagents", "agent-1.jsonl"))
    return Tree(top, clones, transcripts, live)


def bare_walk(root: str) -> int:
    """The baseline: every directory under `root` listed, names and is_dir only."""
    seen = 0
    stack = [root]
    while stack:
        with os.scandir(stack.pop()) as it:
            for entry in it:
                seen += 1
                if entry.is_dir(follow_symlinks=False):
                    stack.append(entry.path)
    return seen


def bare_listing(root: str) -> int:
    with os.scandir(root) as it:
        return sum(1 for e in it if e.is_dir(follow_symlinks=False))


def classify(tree: Tree) -> dict[str, int]:
    from zimmer_sweeper.transcripts.domain import liveness
    from zimmer_sweeper.transcripts.fs import classify_root, clone_working_dirs

    live = liveness(clone_working_dirs([tree.clones]), clone_bases=[tree.clones])
    return classify_root(tree.transcripts, live, math.inf).counts


def classify_names(tree: Tree) -> int:
    from zimmer_sweeper.transcripts.domain import liveness
    from zimmer_sweeper.transcripts.fs import clone_working_dirs

    live = liveness(clone_working_dirs([tree.clones]), clone_bases=[tree.clones])
    judge = live.classify
    with os.scandir(tree.transcripts) as it:
        return sum(1 for e in it if e.is_dir(follow_symlinks=False) and judge(e.name).kind == "orphaned")


def orphan_scan(tree: Tree) -> int:
    from zimmer_sweeper.clones.domain import AGE_THRESHOLD, BATCH_LIMIT, aged_clone_directories, choose_orphans
    from zimmer_sweeper.disk.volumes import list_root

    entries = list_root(tree.clones)  # type: ignore[arg-type]  # a str path: list_root only scandirs it
    aged = aged_clone_directories(entries, now=datetime.now(UTC) + timedelta(days=3), age_bar=AGE_THRESHOLD)
    # Spot-gate's answers, made up: one clone in ten live, another one in ten tracked by some row.
    named = {posixpath.basename(p) for p in tree.live[1::10]}
    tracked = {e.name: e.name in named for e in aged}
    choice = choose_orphans(aged, tracked=tracked, live_clone_paths=tree.live[::10], limit=BATCH_LIMIT)
    return len(choice.candidates) + len(choice.over_limit)


class PeakRss:
    """The process's largest resident set while the block runs, sampled every 2 ms."""

    def __init__(self) -> None:
        self.peak = 0.0
        self._done = threading.Event()
        self._process = psutil.Process()

    def _sample(self) -> None:
        while not self._done.wait(0.002):
            self.peak = max(self.peak, self._process.memory_info().rss / 2**20)

    def __enter__(self) -> PeakRss:
        self.peak = rss_mb()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._done.set()
        self._thread.join()
        self.peak = max(self.peak, rss_mb())


def _timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    started = time.perf_counter()
    out = fn()
    return (time.perf_counter() - started) * 1000, out


def _cpu_timed(fn: Callable[[], Any]) -> tuple[float, float, Any]:
    """Wall and CPU (user + system, this process) ms: on a box shared with other work the CPU
    time moves less than the wall time does."""
    wall, cpu = time.perf_counter(), time.process_time()
    out = fn()
    return (time.perf_counter() - wall) * 1000, (time.process_time() - cpu) * 1000, out


def _pair(sizes: Sizes, subject: tuple[str, Callable[[], Any]], baseline: tuple[str, Callable[[], Any]], per_round: int,
          check: Callable[[Any], None], rises: dict[str, float],
          cpu: dict[str, list[float]]) -> tuple[Series, Series, Series, Series]:
    """Interleaved rounds of a subject and its baseline (wall ms a pass; CPU ms into `cpu`), then
    one sampled round each for the peak RSS (its rise over the RSS before the pass into `rises`)."""
    times = {name: Series(name, "ms", True, per_round) for name in (subject[0], baseline[0])}
    check(subject[1]())  # warm-up, untimed: imports, the page and dentry caches
    baseline[1]()
    for round_no in range(sizes.rounds):
        for name, fn in ((subject, baseline) if round_no % 2 == 0 else (baseline, subject)):
            ms, cpu_ms, out = _cpu_timed(fn)
            times[name].add_latencies([ms])
            cpu.setdefault(name, []).append(cpu_ms)
            if name == subject[0]:
                check(out)
    rss = {name: Series(f"{name}.peak_rss", "MB", True, 1) for name in times}
    for name, fn in (subject, baseline):
        before = rss_mb()
        with PeakRss() as peak:
            fn()
        rss[name].add_latencies([peak.peak])
        rises[name] = round(peak.peak - before, 1)
    return times[subject[0]], times[baseline[0]], rss[subject[0]], rss[baseline[0]]


async def bench_disk(sizes: Sizes, ctx: BenchContext) -> list[Entry]:
    shape = QUICK_SHAPE if sizes.rounds <= 3 else FULL_SHAPE
    load = os.getloadavg()
    built_ms, tree = _timed(lambda: build(shape))
    try:
        want_orphaned = shape.gone + shape.ephemeral

        def check_counts(counts: dict[str, int]) -> None:
            got = (counts["examined"], counts["live"], counts["orphaned_gone_clone"] + counts["orphaned_ephemeral"],
                   counts["unknown"])
            want = (shape.transcripts, shape.live + shape.extensions, want_orphaned, shape.unknown)
            if got != want:
                raise RuntimeError(f"classification counted {got}, want {want}")

        def check_names(orphaned: int) -> None:
            if orphaned != want_orphaned:
                raise RuntimeError(f"names judged {orphaned} orphaned, want {want_orphaned}")

        def check_scan(found: int) -> None:
            want = shape.live - 2 * math.ceil(shape.live / 10)
            if found != want:
                raise RuntimeError(f"orphan scan found {found} candidates, want {want}")

        n = shape.transcripts
        rises: dict[str, float] = {}
        cpu: dict[str, list[float]] = {}
        cls, walk, cls_rss, walk_rss = _pair(sizes, ("sweeper.transcripts.classify", lambda: classify(tree)),
                                             ("os.scandir.walk.transcripts", lambda: bare_walk(tree.transcripts)),
                                             n, check_counts, rises, cpu)
        names, listing, _, _ = _pair(sizes, ("sweeper.transcripts.classify_names", lambda: classify_names(tree)),
                                     ("os.scandir.listing.transcripts", lambda: bare_listing(tree.transcripts)),
                                     n, check_names, rises, cpu)
        scan, clones_listing, scan_rss, clones_rss = _pair(
            sizes, ("sweeper.orphans.scan", lambda: orphan_scan(tree)),
            ("os.scandir.listing.clones", lambda: bare_listing(tree.clones)), shape.live, check_scan, rises, cpu)
    finally:
        removed_ms, _ = _timed(lambda: shutil.rmtree(tree.top, ignore_errors=True))
    extra = {"transcript_dirs": shape.transcripts, "live_clones": shape.live, "extensions": shape.extensions,
             "gone": shape.gone, "ephemeral": shape.ephemeral, "unknown": shape.unknown,
             "subagent_dirs": math.ceil(shape.transcripts / SUBAGENT_EVERY), "tree_build_ms": built_ms,
             "tree_remove_ms": removed_ms, "loadavg_at_start": list(load), "loadavg_at_end": list(os.getloadavg())}
    rise = {"rss_rise_mb": rises}

    def by_cpu(subject: Series, baseline: Series) -> dict[str, Any]:
        a, b = statistics.median(cpu[subject.name]), statistics.median(cpu[baseline.name])
        return {"cpu_ms": {subject.name: cpu[subject.name], baseline.name: cpu[baseline.name]},
                "cpu_ratio": a / b if b else None}

    cls_cpu = by_cpu(cls, walk)
    return [
        Entry(GROUP, cls, walk, extra=extra | cls_cpu | {
            "footnote": f"target ≤ 1.5× the bare walk; by CPU time {cls_cpu['cpu_ratio']:.3f}×; load average "
                        f"{load[0]:.2f} at the start"},
              note="clones base listed, liveness built, root judged, every candidate's newest mtime read"),
        Entry(GROUP, names, listing, extra=by_cpu(names, listing), note="names only: the root listed and every name judged"),
        Entry(GROUP, scan, clones_listing, extra=by_cpu(scan, clones_listing),
              note="orphans.py's disk half: list_root, aged, choose_orphans (no RPC)"),
        Entry(GROUP, cls_rss, walk_rss, extra=rise, note="peak RSS over one classification pass vs one walk"),
        Entry(GROUP, scan_rss, clones_rss, extra=rise, note="peak RSS over one orphan scan vs one listing"),
    ]
