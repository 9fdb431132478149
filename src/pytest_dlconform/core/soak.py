"""The soak: the shipped suites, many times, with random seeds (``python -m pytest_dlconform.core.soak``,
``dlconform soak``).

The ci profile is derandomized: every CI run draws the same examples, so a tolerance whose
error model is wrong for some inputs stays hidden until someone explores. The soak runs the
full suites ``--quick N`` times in the quick profile and ``--explore M`` times in the explore
profile (the thorough profile's example budget, randomized), each run in a fresh interpreter
with its own random seed ``S`` passed as ``--hypothesis-seed=S --dl-seed=S`` (so the seed is
printed in the run's header and stored in its JSON report's settings), against the shipped
known divergences.

A run is judged by its JSON report, not by its terminal output: an unexpected failure is a
claim test whose verdict is "violated" or "error" and that no known divergence explains
(``expected`` is empty). A run that leaves no report, or one with no tests, or that exits
with pytest's usage/internal-error codes, is a failure of its own. Every failure is printed
with a command that reproduces it; ``OUT/soak.json`` keeps every run: seed, profile, wall
time, exit code, verdict counts, the examples hypothesis ran, the load average before and
after, and the failures. Exit status: 0 when no run had an unexpected failure, 1 otherwise,
2 on bad arguments.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import secrets
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from .scheduling import xdist_args

SUITES_PACKAGE = "pytest_dlconform.suites"
#: What `dlconform soak --help` says first, in users' words.
DESCRIPTION = ("Run the shipped suites many times with fresh random examples (the quick profile, then "
               "the thorough budget randomized), and report each unexpected failure with the "
               "command that reproduces it.")
FAILING = ("violated", "error")
# pytest's exit codes that mean the run itself broke (interrupted, internal error, usage
# error, nothing collected): never explained by a known divergence.
BROKEN_EXIT = {2: "interrupted", 3: "internal error", 4: "usage error", 5: "no tests collected"}
_EXAMPLES = re.compile(r"(\d+) passing examples?, (\d+) failing examples?, (\d+) invalid examples?")
_PROGRESS = re.compile(r"\[\s*(\d+)%\]")


@dataclass
class Failure:
    nodeid: str
    verdict: str
    reason: str
    repro: str


@dataclass
class Run:
    index: int
    profile: str
    seed: int
    command: list[str]
    claims: str
    report: str
    log: str
    exit_code: int | None = None
    wall_s: float = 0.0
    load_before: str = ""
    load_after: str = ""
    counts: dict[str, Any] = field(default_factory=dict)
    examples: dict[str, int] = field(default_factory=dict)
    progress_percent: int | None = None
    failures: list[Failure] = field(default_factory=list)
    problem: str = ""

    @property
    def clean(self) -> bool:
        return not self.failures and not self.problem


def _divergences() -> str:
    from importlib import resources

    return str(resources.files("pytest_dlconform.report") / "known_divergences.toml")


def areas() -> list[str]:
    """Claim areas, cheapest-to-judge first: one ``--dl-claims 'area.*'`` run each with --split."""
    from importlib import resources

    found = sorted(p.name.removesuffix(".toml") for p in (resources.files("pytest_dlconform.core") / "claims").iterdir()
                   if p.name.endswith(".toml"))
    first = [a for a in ("autodiff", "modules", "execution", "precision", "interop", "data") if a in found]
    return first + [a for a in found if a not in first]


def command(profile: str, seed: int, report: Path, *, workers: str, divergences: str, extra: Sequence[str],
            claims: str = "", examples_db: str = "") -> list[str]:
    """The pytest command line of one soak run (what ``dlconform run`` does, with the seed).

    With ``examples_db`` the run keeps hypothesis's example database there instead of a
    hypothesis seed (hypothesis ignores the database under a fixed seed): the failures it
    finds are saved, the next run with the same folder replays them first, and
    ``--dl-profile=replay`` reruns only them. ``--dl-seed`` still fixes the framework seeds."""
    randomness = [f"--dl-examples-db={examples_db}"] if examples_db else [f"--hypothesis-seed={seed}"]
    cmd = [sys.executable, "-m", "pytest", "--pyargs", SUITES_PACKAGE, "-p", "no:cacheprovider",
           f"--dl-profile={profile}", *randomness, f"--dl-seed={seed}",
           f"--dl-report={report}", f"--dl-divergences={divergences}", "--hypothesis-show-statistics",
           "--dl-autosave=no"]  # each soak run has its own report; none crowds out the user's saved runs
    if claims:
        cmd.append(f"--dl-claims={claims}")
    if workers not in ("", "0"):
        cmd += ["-n", workers, *xdist_args(extra)]  # worksteal unless extra names a --dist (core/scheduling.py)
    return cmd + list(extra)


def unexpected(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """Claim tests that failed (violated or error) and that no known divergence explains."""
    found = []
    for entry in (doc.get("claims") or {}).values():
        for test in entry.get("tests", []):
            if test.get("verdict") in FAILING and not test.get("expected"):
                found.append(test)
    return found


def repro(test: dict[str, Any], profile: str, seed: int, divergences: str, examples_db: str = "") -> str:
    """The test's own reproduction command, with the hypothesis seed (or the example database,
    replayed) and the divergences the run used."""
    base = test.get("repro") or f"pytest {shlex.quote(str(test.get('nodeid', '?')))} --dl-profile={profile} --dl-seed={seed}"
    base = base.split("  #", 1)[0].strip()  # the report's repro may end in a comment
    randomness = f"--hypothesis-seed={seed}"
    if examples_db:
        base = base.replace(f"--dl-profile={profile}", "--dl-profile=replay")
        randomness = f"--dl-examples-db={shlex.quote(examples_db)}"
    for flag in (randomness, f"--dl-divergences={shlex.quote(divergences)}"):
        if flag.split("=", 1)[0] not in base:
            base += f" {flag}"
    return base


def _load() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return ""


def _scan_log(log: Path) -> tuple[dict[str, int], int | None]:
    """Examples hypothesis ran (from --hypothesis-show-statistics) and the last progress %."""
    try:
        text = log.read_text(errors="replace")
    except OSError:
        return {}, None
    totals = {"passing": 0, "failing": 0, "invalid": 0}
    for m in _EXAMPLES.finditer(text):
        for key, value in zip(totals, m.groups()):
            totals[key] += int(value)
    marks = _PROGRESS.findall(text)
    return totals, (int(marks[-1]) if marks else None)


def judge(run: Run, divergences: str, examples_db: str = "") -> None:
    """Fill in the run's verdict from its JSON report (and its exit code)."""
    run.examples, run.progress_percent = _scan_log(Path(run.log))
    if run.exit_code in BROKEN_EXIT:
        run.problem = f"pytest exit code {run.exit_code} ({BROKEN_EXIT[run.exit_code]}); see {run.log}"
    elif run.exit_code is None:
        run.problem = f"timed out at {run.progress_percent}% of the tests; see {run.log}"
    try:
        doc = json.loads(Path(run.report).read_text())
    except (OSError, ValueError) as exc:
        run.problem = run.problem or f"no usable JSON report ({exc}); see {run.log}"
        return
    run.counts = doc.get("counts", {})
    if not sum((run.counts.get("tests") or {}).values()):
        run.problem = run.problem or f"the report has no tests; see {run.log}"
    run.failures = [
        Failure(str(t.get("nodeid")), str(t.get("verdict")), str(t.get("reason", ""))[:2000],
                repro(t, run.profile, run.seed, divergences, examples_db))
        for t in unexpected(doc)
    ]


def execute(run: Run, timeout: float | None, divergences: str, examples_db: str = "") -> Run:
    run.load_before = _load()
    start = time.monotonic()
    with open(run.log, "w", encoding="utf-8") as log:
        log.write("$ " + shlex.join(run.command) + "\n")
        log.flush()
        proc = subprocess.Popen(run.command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            run.exit_code = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            _stop(proc)
        finally:  # the soak itself stopped (Ctrl-C, SIGTERM): take its run down with it
            if proc.poll() is None:
                _stop(proc)
    run.wall_s = round(time.monotonic() - start, 1)
    run.load_after = _load()
    judge(run, divergences, examples_db)
    return run


def _stop(proc: subprocess.Popen[bytes]) -> None:
    """End the run's own process group (pytest and its xdist workers), politely first."""
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    except ProcessLookupError:
        pass


def _summary_line(run: Run) -> str:
    tests = run.counts.get("tests") or {}
    ex = run.examples
    state = "clean" if run.clean else f"{len(run.failures)} unexpected failure(s) {run.problem}".strip()
    where = f" claims {run.claims}" if run.claims else ""
    return (f"run {run.index} {run.profile} seed={run.seed}{where}: {state}; exit {run.exit_code}, {run.wall_s:.0f} s, "
            f"tests {json.dumps(tests, sort_keys=True)}, examples passing={ex.get('passing')} "
            f"invalid={ex.get('invalid')}, load {run.load_before} -> {run.load_after}")


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="dlconform soak", description=DESCRIPTION)
    p.add_argument("--quick", type=int, default=10, metavar="N", help="runs in the quick profile (default 10)")
    p.add_argument("--explore", type=int, default=1, metavar="M",
                   help="runs with the thorough example budget, randomized (default 1)")
    p.add_argument("--seeds", type=int, nargs="*", default=None, metavar="S",
                   help="seeds to use, in order (default: fresh random seeds)")
    p.add_argument("--out", default="soak-out", help="folder for reports, logs and soak.json (default ./soak-out)")
    p.add_argument("-n", "--workers", default="2", help="pytest-xdist workers per run (default 2; 0 for none)")
    p.add_argument("--timeout", type=float, default=None, metavar="SECONDS", help="wall-clock limit per run")
    p.add_argument("--divergences", default=None, metavar="TOML", help="known divergences (default: the shipped file)")
    p.add_argument("--split", action="store_true",
                   help="run each claim area as its own pytest run (same seed): a run cut short by --timeout "
                        "still leaves complete reports for the areas it finished")
    p.add_argument("--examples-db", default="", metavar="DIR",
                   help="keep hypothesis's example database in DIR (e.g. a CI artifact restored from the last night): "
                        "stored failures are replayed first, new ones saved; runs then take no hypothesis seed")
    p.add_argument("pytest_args", nargs="*", help="after --: extra pytest arguments for every run")
    return p


def _plan(args: argparse.Namespace) -> list[tuple[str, int, str]]:
    profiles = ["quick"] * args.quick + ["explore"] * args.explore
    seeds = list(args.seeds or [])
    seeds += [secrets.randbelow(2**31) for _ in range(len(profiles) - len(seeds))]
    parts = [f"{a}.*" for a in areas()] if getattr(args, "split", False) else [""]
    return [(p, s, c) for p, s in zip(profiles, seeds) for c in parts]


def _validate(args: argparse.Namespace) -> str:
    if args.quick < 0 or args.explore < 0 or args.quick + args.explore == 0:
        return f"--quick {args.quick} --explore {args.explore}: ask for at least one run (counts >= 0)"
    if args.seeds and len(args.seeds) > args.quick + args.explore:
        return f"--seeds has {len(args.seeds)} seeds for {args.quick + args.explore} runs: give at most one per run"
    if args.timeout is not None and not args.timeout > 0:
        return f"--timeout {args.timeout}: give a positive number of seconds"
    if args.divergences and not Path(args.divergences).is_file():
        return f"--divergences {args.divergences}: no such file; give a known-divergences TOML"
    if args.examples_db and Path(args.examples_db).exists() and not Path(args.examples_db).is_dir():
        return f"--examples-db {args.examples_db}: is a file; give a folder (created if missing)"
    return ""


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    problem = _validate(args)
    if problem:
        sys.stderr.write(f"dlconform soak: {problem}\n")
        return 2
    # SIGTERM (a CI cancel, kill PID) unwinds like Ctrl-C, so the running suite is stopped too.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    divergences = str(Path(args.divergences).resolve()) if args.divergences else _divergences()
    examples_db = str(Path(args.examples_db).resolve()) if args.examples_db else ""
    runs: list[Run] = []
    for i, (profile, seed, claims) in enumerate(_plan(args)):
        stem = out / (f"run{i:02d}-{profile}-{seed}" + (f"-{claims.split('.')[0]}" if claims else ""))
        report = Path(f"{stem}.json")
        cmd = command(profile, seed, report, workers=args.workers, divergences=divergences, extra=args.pytest_args,
                      claims=claims, examples_db=examples_db)
        run = Run(i, profile, seed, cmd, claims, str(report), f"{stem}.log")
        print(f"soak: run {i} {profile} seed={seed}{' claims ' + claims if claims else ''} (log {run.log})", flush=True)
        runs.append(execute(run, args.timeout, divergences, examples_db))
        print("soak: " + _summary_line(run), flush=True)
        for f in run.failures:
            print(f"  UNEXPECTED {f.verdict}: {f.nodeid}\n    reproduce: {f.repro}", flush=True)
        _write(out / "soak.json", runs)
    bad = [r for r in runs if not r.clean]
    print(f"soak: {len(runs) - len(bad)} of {len(runs)} runs clean" + (f"; see {out / 'soak.json'}" if bad else ""))
    return 1 if bad else 0


def _write(path: Path, runs: list[Run]) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps({"runs": [asdict(r) for r in runs]}, indent=2))
    tmp.replace(path)


if __name__ == "__main__":
    sys.exit(main())
