"""``dlconform mutate``: the mutation score of the shipped suites.

For each selected mutant, one fresh pytest run of the suites of the mutant's claims
(``--dl-claims``, and its ``-k`` selection) in the chosen profile (ci by default) with the
mutant active in every process (:mod:`.site`, :mod:`.hook`). The run is judged by its JSON
report, as the soak judges one (:mod:`pytest_dlconform.core.soak`):

- killed: some test of the run was violated and no known divergence explains it;
- survived: nothing violated, nothing errored, some test held, and the mutant was applied;
- error: the mutant could not be applied, no process imported its target, a test errored,
  nothing ran (no tests, or all not applicable), pytest broke, or the run timed out.

``--baseline`` first runs the same claims with the hook installed and no mutant: it must be
clean, or the mutants' verdicts mean nothing (``--baseline-only``: that run alone).
Prints a table per area and the score
(killed / mutants run) and writes ``OUT/mutate.json``. Exit status: 0, or 1 when the
baseline is not clean or the score is under ``--fail-under``; 2 on bad arguments.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shlex
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ...core import soak
from ...core.scheduling import xdist_args
from . import AREAS, Mutant, registry, site

KILLED, SURVIVED, ERROR = "killed", "survived", "error"
CLEAN = "(clean)"
CHECKOUT = Path(__file__).resolve().parents[4]  # src/pytest_dlconform/run/mutants/runner.py -> the repository root


@dataclass
class Outcome:
    mutant: str
    area: str
    claims: str
    select: str
    command: list[str]
    report: str
    log: str
    verdict: str = ERROR
    detail: str = ""
    wall_s: float = 0.0
    exit_code: int | None = None
    counts: dict[str, int] = field(default_factory=dict)
    killers: list[str] = field(default_factory=list)
    processes_applied: int = 0
    load_before: str = ""
    load_after: str = ""


def command(m: Mutant | None, claims: str, select: str, report: Path, *, profile: str, workers: str,
            divergences: str, extra: Sequence[str], models: Sequence[str] = ()) -> list[str]:
    cmd = [sys.executable, "-m", "pytest", "--pyargs", soak.SUITES_PACKAGE, "-p", "no:cacheprovider",
           f"--dl-profile={profile}", f"--dl-report={report}", f"--dl-divergences={divergences}",
           f"--dl-claims={claims}", "-q", "--no-header", "-rfE", "--dl-autosave=no"]  # a report of its own
    cmd += [f"--dl-model={ref}" for ref in models]  # the model.* claims run on a shipped example model
    if m is not None:
        # The first violation decides the verdict (killed); the rest would only cost time, and a failing
        # hypothesis test shrinks for long. Known divergences are xfails and do not count; the clean run
        # runs in full.
        cmd.append("--maxfail=1")
    if select:
        cmd += ["-k", select]
    if workers not in ("", "0"):
        cmd += ["-n", workers, *xdist_args(extra)]  # worksteal unless extra names a --dist (core/scheduling.py)
    return cmd + list(extra)


def _tests(doc: dict[str, Any]) -> list[dict[str, Any]]:
    return [t for entry in (doc.get("claims") or {}).values() for t in entry.get("tests", [])]


def _read_log(path: Path) -> tuple[int, list[str]]:
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError:
        return 0, []
    applied = sum(1 for line in lines if " applied " in f" {line} ")
    failed = [line.split(" ", 2)[2] for line in lines if line.split(" ")[1:2] == ["failed"]]
    return applied, failed


def classify(out: Outcome, doc: dict[str, Any] | None, *, mutant_log: Path | None, target: str) -> None:
    """Fill in the verdict of one run from its report, its exit code and the mutant's log."""
    applied, failed = _read_log(mutant_log) if mutant_log else (0, [])
    out.processes_applied = applied
    if failed:
        out.verdict, out.detail = ERROR, f"mutant not applied: {failed[0]}"
        return
    if out.exit_code is None:
        out.verdict, out.detail = ERROR, f"timed out; see {out.log}"
        return
    # xdist ends a run that reached --maxfail as interrupted (exit 2); its report is complete up to there.
    stopped = out.exit_code == 2 and doc is not None and "--maxfail=1" in out.command
    if (out.exit_code in soak.BROKEN_EXIT and not stopped) or doc is None:
        why = soak.BROKEN_EXIT.get(out.exit_code or 0, "no usable JSON report")
        out.verdict, out.detail = ERROR, f"pytest exit {out.exit_code} ({why}); see {out.log}"
        return
    tests = _tests(doc)
    counts = dict.fromkeys(("holds", "violated", "expected", "not applicable", "error"), 0)
    for t in tests:
        key = "expected" if t.get("verdict") == "violated" and t.get("expected") else str(t.get("verdict"))
        counts[key] = counts.get(key, 0) + 1
    out.counts = counts
    kills = [t for t in tests if t.get("verdict") == "violated" and not t.get("expected")]
    if kills:
        out.verdict = KILLED
        out.killers = [str(t.get("nodeid")) for t in kills]
        reason = str(kills[0].get("reason", "")).strip().splitlines()
        out.detail = f"{len(kills)} violated, e.g. {out.killers[0]}: {reason[0][:300] if reason else ''}"
    elif stopped and not counts["error"]:
        out.verdict, out.detail = ERROR, f"pytest exit 2 (interrupted) with nothing violated; see {out.log}"
    elif mutant_log is not None and applied == 0:
        out.verdict, out.detail = ERROR, f"mutant never applied: no process of the run imported {target}"
    elif counts["error"]:
        first = next(t for t in tests if t.get("verdict") == "error")
        out.verdict, out.detail = ERROR, f"{counts['error']} test error(s), e.g. {first.get('nodeid')}"
    elif not counts["holds"]:
        out.verdict, out.detail = ERROR, f"nothing ran: {len(tests)} test(s), none held; see {out.log}"
    else:
        out.verdict = SURVIVED
        out.detail = f"all {counts['holds']} test(s) held" + (" (the clean run)" if mutant_log is None else "")


#: The runs in progress (``--jobs`` runs them from threads): a stop of the runner stops them
#: all, and once _STOPPING is set no run starts.
_RUNNING: set[subprocess.Popen[Any]] = set()
_STOPPING = threading.Event()
#: Held while a run is started (flag checked, process spawned, registered) and while a stop
#: sets the flag and takes the list of runs: a run either starts before the stop, and is
#: stopped with the others, or never starts.
_STARTING = threading.Lock()


def _stop_running() -> None:
    with _STARTING:
        _STOPPING.set()
        running = list(_RUNNING)
    for proc in running:
        soak._stop(proc)


def _stop_all(*_: Any) -> None:
    _stop_running()
    sys.exit(143)


def execute(out: Outcome, env: dict[str, str], timeout: float | None, mutant_log: Path | None, target: str) -> Outcome:
    out.load_before = soak._load()
    start = time.monotonic()
    with open(out.log, "w", encoding="utf-8") as log:
        log.write(f"$ DLCONFORM_MUTANT={out.mutant} " + shlex.join(out.command) + "\n")
        log.flush()
        with _STARTING:
            if _STOPPING.is_set():  # the runner was stopped before this run started: it never does
                raise KeyboardInterrupt
            proc = subprocess.Popen(out.command, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
            _RUNNING.add(proc)
        try:
            out.exit_code = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            soak._stop(proc)
        finally:  # the runner itself stopped: take the run down with it
            if proc.poll() is None:
                soak._stop(proc)
            _RUNNING.discard(proc)
    out.wall_s = round(time.monotonic() - start, 1)
    out.load_after = soak._load()
    try:
        doc = json.loads(Path(out.report).read_text())
    except (OSError, ValueError):
        doc = None
    classify(out, doc, mutant_log=mutant_log, target=target)
    return out


# ----------------------------------------------------------------- the command


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="dlconform mutate", description=(
        "The mutation score: run the shipped suites against deliberately broken frameworks (one mutant at a time) "
        "and count the mutants they kill."))
    p.add_argument("--area", action="append", default=[], metavar="A", help=f"only mutants of area A ({', '.join(AREAS)})")
    p.add_argument("--mutant", nargs="+", action="extend", default=[], metavar="NAME", help="only these mutants")
    p.add_argument("--sample", type=int, default=None, metavar="N", help="a random sample of N of the selected mutants")
    p.add_argument("--seed", default="0", metavar="S", help="the sample's seed (any string, e.g. the date or a commit)")
    p.add_argument("-n", "--workers", default="2", help="pytest-xdist workers per run (default 2; 0 for none)")
    p.add_argument("-j", "--jobs", type=int, default=1, metavar="J",
                   help="mutant runs at a time (default 1; -n 0 -j 2 keeps 2 cores busy with half the imports)")
    p.add_argument("--profile", default="ci", choices=("quick", "ci", "thorough", "explore"), help="default ci")
    p.add_argument("--out", default="mutate-out", help="folder for reports, logs and mutate.json (default ./mutate-out)")
    p.add_argument("--timeout", type=float, default=600.0, metavar="SECONDS", help="wall-clock limit per run (600)")
    p.add_argument("--baseline", action="store_true", help="first a clean run of the same claims through the hook")
    p.add_argument("--baseline-timeout", type=float, default=3600.0, metavar="SECONDS",
                   help="wall-clock limit of the clean run (3600)")
    p.add_argument("--baseline-only", action="store_true",
                   help="only the clean run of the selected mutants' claims (exit 1 unless it is clean)")
    p.add_argument("--fail-under", type=float, default=0.0, metavar="PERCENT",
                   help="exit 1 when fewer than PERCENT of the mutants run are killed (default 0: report only)")
    p.add_argument("--list", action="store_true", help="print the selected mutants and their citations, run nothing")
    p.add_argument("pytest_args", nargs="*", help="after --: extra pytest arguments for every run")
    return p


def select(args: argparse.Namespace, library: dict[str, Mutant]) -> tuple[list[Mutant], str]:
    """The mutants to run, or a one-line problem naming the bad value and the fix."""
    for a in args.area:
        if a not in AREAS:
            return [], f"--area {a}: no such area; give one of {', '.join(AREAS)}"
    unknown = [n for n in args.mutant if n not in library]
    if unknown:
        return [], f"--mutant {unknown[0]}: no such mutant; list them with `dlconform mutate --list`"
    chosen = [library[n] for n in args.mutant] if args.mutant else list(library.values())
    if args.area:
        chosen = [m for m in chosen if set(m.areas) & set(args.area)]
    if not chosen:
        return [], "the selection is empty: widen --area/--mutant"
    if args.sample is not None:
        if not 1 <= args.sample <= len(chosen):
            return [], f"--sample {args.sample}: give a count from 1 to {len(chosen)} (the mutants selected)"
        chosen = sorted(random.Random(str(args.seed)).sample(chosen, args.sample), key=lambda m: m.name)
    for flag, value in (("--timeout", args.timeout), ("--baseline-timeout", args.baseline_timeout)):
        if not value > 0:
            return [], f"{flag} {value}: give a positive number of seconds"
    if not 0 <= args.fail_under <= 100:
        return [], f"--fail-under {args.fail_under}: give a percentage from 0 to 100"
    if args.jobs < 1:
        return [], f"--jobs {args.jobs}: give a positive number of mutant runs at a time (1 runs them one by one)"
    missing = [m for m in chosen if m.model and not _example_folder(m.model)]
    if missing:
        return [], (f"--mutant {missing[0].name}: its example model {missing[0].model} is not importable; "
                    "run from a checkout of pytest-dlconform (examples/) or leave out --area model")
    return chosen, ""


def _example_folder(ref: str) -> str:
    """The folder from which ``ref``'s module imports: the current directory, else the checkout
    this package was installed from (editable install); '' when neither has it."""
    first = ref.partition(":")[0].split(".")[0]
    for folder in (Path.cwd(), CHECKOUT):
        if (folder / first / "__init__.py").is_file() or (folder / f"{first}.py").is_file():
            return str(folder)
    return ""


def score(outcomes: Sequence[Outcome]) -> dict[str, Any]:
    per_area: dict[str, dict[str, int]] = {}
    for o in outcomes:
        row = per_area.setdefault(o.area, {KILLED: 0, SURVIVED: 0, ERROR: 0})
        row[o.verdict] += 1
    killed = sum(r[KILLED] for r in per_area.values())
    total = len(outcomes)
    return {"per_area": dict(sorted(per_area.items())), "killed": killed, "total": total,
            "survived": sum(r[SURVIVED] for r in per_area.values()), "error": sum(r[ERROR] for r in per_area.values()),
            "score_percent": round(100.0 * killed / total, 1) if total else None}


def table(outcomes: Sequence[Outcome]) -> str:
    lines = []
    for area in sorted({o.area for o in outcomes}):
        lines.append(f"\n{area}")
        for o in (o for o in outcomes if o.area == area):
            lines.append(f"  {o.verdict:<9} {o.mutant:<44} {o.wall_s:>6.0f} s  {o.detail[:160]}")
    s = score(outcomes)
    lines.append("\narea         killed survived error")
    for area, row in s["per_area"].items():
        lines.append(f"{area:<12} {row[KILLED]:>6} {row[SURVIVED]:>8} {row[ERROR]:>5}")
    lines.append(f"score: {s['killed']} of {s['total']} killed ({s['score_percent']}%), "
                 f"{s['survived']} survived, {s['error']} harness error(s)")
    return "\n".join(lines)


def _list(chosen: Sequence[Mutant]) -> int:
    for m in chosen:
        print(f"{m.name}  [{','.join(m.areas)}]  claims {','.join(m.claims)}" + (f"  -k {m.select!r}" if m.select else ""))
        print(f"    {m.bug}\n    {m.cite}")
    print(f"{len(chosen)} mutant(s)")
    return 0


def _write(path: Path, outcomes: Sequence[Outcome], baseline: Outcome | None, args: argparse.Namespace) -> None:
    doc = {"profile": args.profile, "workers": args.workers, "jobs": args.jobs, "seed": args.seed, "sample": args.sample,
           "baseline": asdict(baseline) if baseline else None, "score": score(outcomes),
           "mutants": [asdict(o) for o in outcomes]}
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(doc, indent=2))
    tmp.replace(path)


def _run_one(m: Mutant | None, claims: str, sel: str, out_dir: Path, folder: Path, args: argparse.Namespace,
             divergences: str, models: Sequence[str] = ()) -> Outcome:
    stem = out_dir / (m.name if m else "baseline")
    report = Path(f"{stem}.json")
    report.unlink(missing_ok=True)
    mutant_log = Path(f"{stem}.mutant.log") if m else None
    if mutant_log:
        mutant_log.unlink(missing_ok=True)
    cmd = command(m, claims, sel, report, profile=args.profile, workers=args.workers, divergences=divergences,
                  extra=args.pytest_args, models=models)
    out = Outcome(m.name if m else CLEAN, m.areas[0] if m else "-", claims, sel, cmd, str(report), f"{stem}.log")
    env = site.environment(folder, m.name if m else None, mutant_log)
    # Every process of the run (the factory check's fresh interpreter, rank processes) imports the example.
    extra_path = [f for f in dict.fromkeys(_example_folder(ref) for ref in models) if f]
    env["PYTHONPATH"] = os.pathsep.join([env["PYTHONPATH"], *extra_path])
    # The clean run covers the claims of every selected mutant at once: the whole library's took
    # more than 600 s at a load of 25 on the 2-core machine, so it gets --baseline-timeout.
    return execute(out, env, args.timeout if m else args.baseline_timeout, mutant_log, m.target if m else "")


def _run_mutants(chosen: Sequence[Mutant], out_dir: Path, folder: Path, args: argparse.Namespace, divergences: str,
                 baseline: Outcome | None) -> list[Outcome]:
    """Every chosen mutant's run, ``args.jobs`` at a time (each its own fresh pytest run with
    its own report and logs), each printed when it starts and ends and written to mutate.json
    as it ends; the outcomes come back in the order of ``chosen``."""
    from concurrent.futures import ThreadPoolExecutor

    done: dict[int, Outcome] = {}
    lock = threading.Lock()
    _STOPPING.clear()

    def one(i: int, m: Mutant) -> None:
        with lock:
            if _STOPPING.is_set():
                return
            print(f"mutate: [{i + 1}/{len(chosen)}] {m.name} on {','.join(m.claims)}", flush=True)
        o = _run_one(m, ",".join(m.claims), m.select, out_dir, folder, args, divergences, [m.model] if m.model else [])
        with lock:
            done[i] = o
            tail = f" ({m.name})" if args.jobs > 1 else ""
            print(f"mutate:   {o.verdict} in {o.wall_s:.0f} s{tail}: {o.detail[:300]}", flush=True)
            _write(out_dir / "mutate.json", [done[k] for k in sorted(done)], baseline, args)

    pool = ThreadPoolExecutor(max_workers=args.jobs)
    try:
        for future in [pool.submit(one, i, m) for i, m in enumerate(chosen)]:
            future.result()
    except BaseException:  # ^C or SIGTERM (_stop_all) reaches this thread only: no new run, stop the others
        _STOPPING.set()
        pool.shutdown(wait=False, cancel_futures=True)
        _stop_running()
        raise
    finally:  # and start no further run
        pool.shutdown(wait=True, cancel_futures=True)
    return [done[i] for i in range(len(chosen))]


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    chosen, problem = select(args, registry())
    if problem:
        sys.stderr.write(f"dlconform mutate: {problem}\n")
        return 2
    if args.list:
        return _list(chosen)
    import signal

    signal.signal(signal.SIGTERM, _stop_all)  # a CI cancel stops the running suites too
    out_dir = Path(args.out).resolve()
    out_dir.mkdir(parents=True, exist_ok=True)
    folder = site.prepare(out_dir / "site")
    divergences = soak._divergences()
    baseline = None
    if args.baseline or args.baseline_only:
        claims = ",".join(sorted({c for m in chosen for c in m.claims}))
        print(f"mutate: clean run of {claims}", flush=True)
        models = sorted({m.model for m in chosen if m.model})
        baseline = _run_one(None, claims, "", out_dir, folder, args, divergences, models)
        print(f"mutate: clean run {baseline.verdict}: {baseline.detail} ({baseline.wall_s:.0f} s)", flush=True)
    if args.baseline_only and baseline is not None:
        _write(out_dir / "mutate.json", [], baseline, args)
        return 0 if baseline.verdict == SURVIVED else 1
    outcomes = _run_mutants(chosen, out_dir, folder, args, divergences, baseline)
    print(table(outcomes))
    print(f"mutate: summary in {out_dir / 'mutate.json'}")
    s = score(outcomes)
    bad_baseline = baseline is not None and baseline.verdict != SURVIVED
    if bad_baseline:
        print(f"mutate: the clean run is not clean ({baseline.detail if baseline else ''}): the verdicts mean nothing")
    return 1 if bad_baseline or (s["score_percent"] or 0) < args.fail_under else 0


if __name__ == "__main__":
    sys.exit(main())
