"""The ``dlconform`` console script.

    dlconform claims [GLOB ...]          print the claims ledger (--format text|markdown|json)
    dlconform claims --check [SUITES]    check that suites and claim registry agree
    dlconform run [PYTEST ARGS]          run the shipped suites (pytest --pyargs pytest_dlconform.suites)
    dlconform compare OLD.json NEW.json  upgrade check: exit 1 on a regressed claim, 2 on unusable input
    dlconform html REPORT.json OUT.html  render a JSON report as the HTML matrix
    dlconform modes REPORT.json [--check] the documented modes a run checked, per claim (modes.py)
    dlconform repro NODEID [--report R.json] [--out FILE]
                                         the standalone script that reproduces a violated test (repro.py)
    dlconform soak [--quick N] [--explore M] [--out DIR] [-- PYTEST ARGS]
                                         run the suites N+M times with random seeds (soak.py)
    dlconform mutate [--area A] [--mutant NAME ...] [--sample N --seed S] [-n 2]
                                         the mutation score: the suites against framework mutants (mutants/)
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

SUITES_PACKAGE = "pytest_dlconform.suites"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="dlconform", description="pytest-dlconform: deep-learning framework conformance")
    sub = parser.add_subparsers(dest="command", required=True)
    claims = sub.add_parser("claims", help="print the claims ledger")
    claims.add_argument("globs", nargs="*", default=["*"], help="claim-id globs, e.g. 'autodiff.*'")
    claims.add_argument("--format", choices=("text", "markdown", "json"), default="text")
    claims.add_argument("--check", nargs="?", const="", metavar="SUITES",
                        help="instead of printing, check statically that every suite test names a registered claim "
                             "and every registered claim is checked by a test (default: the installed suites)")
    run = sub.add_parser("run", help="run the shipped conformance suites; extra arguments go to pytest")
    run.add_argument("pytest_args", nargs=argparse.REMAINDER)
    cmp = sub.add_parser("compare", help="compare two JSON reports (upgrade check)",
                         description="Exit status: 0 no regression, 1 a claim regressed (held, now violated) or held and "
                                     "now errors, 2 unusable input.")
    cmp.add_argument("old", help="the earlier JSON report (--dl-report)")
    cmp.add_argument("new", help="the later JSON report")
    cmp.add_argument("--format", choices=("text", "markdown"), default="text", help="what to print on stdout")
    cmp.add_argument("--markdown-file", metavar="PATH",
                     help="also append the Markdown summary to PATH (e.g. \"$GITHUB_STEP_SUMMARY\")")
    cmp.add_argument("--threshold", type=float, default=None, metavar="FRACTION",
                     help="report a margin that grew by at least this fraction of the tolerance (default 0.25)")
    cmp.add_argument("--known-divergences", metavar="TOML", help="known-divergences file applied to the new report")
    cmp.add_argument("--fail-on-drift", action="store_true", help="exit 1 on evidence drift too")
    sub.add_parser("mutate", help="the mutation score (mutants/runner.py)", add_help=False)
    sub.add_parser("modes", help="the documented modes a JSON report checked, per claim (modes.py)", add_help=False)
    sub.add_parser("repro", help="print the standalone script that reproduces a violated test (repro.py)", add_help=False)
    page = sub.add_parser("html", help="render a JSON report as a self-contained HTML page")
    page.add_argument("report")
    page.add_argument("output")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["run"]:
        # Everything after "run" belongs to pytest, options included (argparse's REMAINDER
        # refuses a leading "-n 2").
        return _run(argv[1:])
    if argv[:1] == ["soak"]:
        from . import soak

        return soak.main(argv[1:])
    if argv[:1] == ["mutate"]:
        from .mutants import runner

        return runner.main(argv[1:])
    if argv[:1] == ["modes"]:
        from . import modes

        return modes.main(argv[1:])
    if argv[:1] == ["repro"]:
        from . import repro

        return repro.main(argv[1:])
    args = _parser().parse_args(argv)
    if args.command == "claims":
        from . import ledger

        if args.check is not None:
            return ledger.print_coverage(args.check or None)
        return ledger.print_ledger(args.globs, fmt=args.format)
    if args.command == "compare":
        return _compare(args)
    if args.command == "html":
        return _html(args)
    return _run(args.pytest_args)


def _run(pytest_args: Sequence[str]) -> int:
    import os

    import pytest

    from .settings import PACKAGED_DIVERGENCES_VAR

    # The packaged known divergences become --dl-divergences's default (settings._divergences),
    # so a flag, the environment variable or an ini key the user set still decides.
    os.environ[PACKAGED_DIVERGENCES_VAR] = "1"
    return int(pytest.main(["--pyargs", SUITES_PACKAGE, "-p", "no:cacheprovider", *pytest_args]))


def _compare(args: argparse.Namespace) -> int:
    from . import compare

    threshold = compare.DEFAULT_DRIFT if args.threshold is None else args.threshold
    if not threshold > 0:
        sys.stderr.write(f"dlconform compare: --threshold {args.threshold} must be a positive fraction of the tolerance\n")
        return compare.EXIT_UNUSABLE
    try:
        result = compare.run(args.old, args.new, threshold=threshold, divergences_path=args.known_divergences)
    except compare.UnusableReport as exc:
        sys.stderr.write(f"dlconform compare: {exc}\n")
        return compare.EXIT_UNUSABLE
    sys.stdout.write(compare.to_markdown(result) if args.format == "markdown" else compare.to_text(result))
    if args.markdown_file:
        try:
            with open(args.markdown_file, "a", encoding="utf-8") as fh:
                fh.write(compare.to_markdown(result))
        except OSError as exc:
            sys.stderr.write(f"dlconform compare: cannot write --markdown-file {args.markdown_file}: {exc}\n")
            return compare.EXIT_UNUSABLE
    if args.fail_on_drift and result.drift:
        return compare.EXIT_REGRESSED
    return result.exit_code


def _html(args: argparse.Namespace) -> int:
    from . import compare, html, results

    try:
        doc = compare.load(args.report, "report")
        results.write_atomic(args.output, html.render(doc))
    except compare.UnusableReport as exc:
        sys.stderr.write(f"dlconform html: {exc}\n")
        return 2
    except OSError as exc:
        sys.stderr.write(f"dlconform html: cannot write {args.output}: {exc}\n")
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
