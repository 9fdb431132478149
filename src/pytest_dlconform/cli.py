"""The ``dlconform`` console script.

    dlconform --version                  this package's version and the installed frameworks' versions
    dlconform claims [GLOB ...]          print the claims ledger (--format text|markdown|json)
    dlconform claims --check [SUITES]    check that suites and claim registry agree
    dlconform run [PYTEST ARGS]          run the shipped suites (pytest --pyargs pytest_dlconform.suites);
                                         with --dl-model only the model suites
    dlconform model MODULE:FACTORY [--quick] [PYTEST ARGS]
                                         the model claims on your own model (suites/model), its matrix
    dlconform compare OLD.json NEW.json  upgrade check: exit 1 on a regressed claim, 2 on unusable input
                                         (--format text|markdown|json; -v: every known-divergence entry)
    dlconform compare --last             the same for the two newest reports runs saved (.dlconform/reports)
    dlconform html REPORT.json OUT.html  render a JSON report as the HTML matrix
    dlconform modes REPORT.json [--check] the documented modes a run checked, per claim (modes.py)
    dlconform repro NODEID [--report R.json] [--out FILE]
                                         the standalone script that reproduces a violated test (repro.py)
    dlconform soak [--quick N] [--explore M] [--out DIR] [-- PYTEST ARGS]
                                         run the suites N+M times with random seeds (soak.py)
    dlconform merge SHARD.json ... -o MERGED.json [--html MERGED.html]
                                         join the reports of the N shards of a --dl-shard run (merge.py)
    dlconform durations REPORT.json ... -o FILE
                                         the durations file --dl-shard balances by (shards.py)
    dlconform coverage --api LEDGER.json [NEW.json] [--uncovered] [--html OUT.html] [--fail-on-new]
                                         the API ledger of a --dl-api-ledger run; with two, the APIs
                                         new in NEW that no test calls (api_coverage.py)
    dlconform mutate [--area A] [--mutant NAME ...] [--sample N --seed S] [-n 2]
                                         the mutation score: the suites against framework mutants (mutants/)

A bare ``dlconform`` prints the help and exits 0: asking what the tool does is not an error.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

SUITES_PACKAGE = "pytest_dlconform.suites"
EXIT_USAGE = 4  # as pytest's usage error: a claim glob that matches nothing

# The subcommands that hand their arguments to a parser of their own (or to pytest).
DELEGATED = ("run", "model", "soak", "mutate", "modes", "repro", "merge", "durations", "coverage")
MODEL_SUITES = SUITES_PACKAGE + ".model"

MODEL_USAGE = """\
usage: dlconform model MODULE:FACTORY [--quick] [PYTEST ARGS]

Run the model claims (suites/model: gradients, determinism, export, compile, distribution,
precision) on your own model and print their conformance matrix; the exit status is pytest's.
MODULE:FACTORY names the factory as --dl-model does (docs/own-model.md); --quick takes the
quick profile (--dl-profile=quick) instead of ci; every further argument goes to pytest
(-k, -x, --dl-report R.json, --dl-framework, another --dl-model, ...).
"""

RUN_PREFACE = """\
dlconform run [PYTEST ARGS]: pytest, with the conformance suites this package ships.

What it adds to a plain `pytest` run:
  - the packaged suites: it runs `pytest --pyargs pytest_dlconform.suites` (narrow it with
    --dl-claims 'autodiff.*' or -k), without pytest's cache folder;
  - with --dl-model on the command line, only the model suites (pytest_dlconform.suites.model;
    `dlconform model MODULE:FACTORY` is the short form);
  - the shipped known-divergences file as the default --dl-divergences: the framework bugs
    this package reproduced become expected failures (xfail, with the reason) as long as
    they show exactly the recorded symptom; --dl-divergences, DLCONFORM_DIVERGENCES or a
    dl_divergences ini key still choose another file.
Like any run with the plugin it ends with the conformance matrix; --dl-report R.json and
--dl-html R.html write the JSON report and the HTML page (`dlconform compare`, `dlconform
html` read the report). Each run's report is also saved in .dlconform/reports under the
rootdir, the last 20 kept (`dlconform compare --last`, --dl-baseline=last; --dl-autosave=no
turns it off). Every argument goes to pytest; the --dl-* options are in the
"deep-learning conformance" group below.

pytest's own help follows.

"""


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="dlconform", description="pytest-dlconform: conformance suites for the documented behaviour of "
        "TensorFlow and PyTorch, and the tools around their reports.",
        epilog="`dlconform COMMAND --help` describes a command; `dlconform run --help` also lists the --dl-* options.")
    parser.add_argument("--version", action="store_true",
                        help="print the version of pytest-dlconform and of the installed frameworks, then exit")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", title="commands")
    claims = sub.add_parser("claims", help="list the claims the suites check (statement, source, frameworks), or "
                                           "check that every test names a registered claim",
                            description="Print the claims ledger: each claim's precise statement, where it comes "
                                        "from and which frameworks it concerns. Exit status 4 when a glob matches "
                                        "no claim id.")
    claims.add_argument("globs", nargs="*", default=["*"], help="claim-id globs, e.g. 'autodiff.*' (default: all)")
    claims.add_argument("--format", choices=("text", "markdown", "json"), default="text", help="output format")
    claims.add_argument("--check", nargs="?", const="", metavar="SUITES",
                        help="instead of printing, check statically that every suite test names a registered claim "
                             "and every registered claim is checked by a test (default: the installed suites)")
    sub.add_parser("run", help="run the shipped conformance suites; every further argument goes to pytest "
                               "(`dlconform run --help`)", add_help=False)
    sub.add_parser("model", help="run only the model claims on your own model: dlconform model MODULE:FACTORY "
                                 "[--quick] [PYTEST ARGS]", add_help=False)
    cmp = sub.add_parser("compare", help="compare two JSON reports: the upgrade check (exit 1 on a regressed claim)",
                         description="Exit status: 0 no regression, 1 a claim regressed (held, now violated) or held and "
                                     "now errors, 2 unusable input.")
    cmp.add_argument("old", nargs="?", help="the earlier JSON report (--dl-report)")
    cmp.add_argument("new", nargs="?", help="the later JSON report")
    cmp.add_argument("--last", action="store_true",
                     help="instead of OLD and NEW: the two newest reports runs saved (--dl-autosave), the older "
                          "against the newer")
    cmp.add_argument("--saved", metavar="DIR",
                     help="with --last: the folder of saved reports (default: DLCONFORM_AUTOSAVE if it names a "
                          "folder, else the nearest .dlconform/reports in the current folder or above)")
    cmp.add_argument("-v", "--verbose", action="store_true",
                     help="a line for every known-divergence entry (default: only expired and unmatched ones, "
                          "the others counted on one line)")
    cmp.add_argument("--format", choices=("text", "markdown", "json"), default="text",
                     help="what to print on stdout (json: the comparison as data, for scripts)")
    cmp.add_argument("--markdown-file", metavar="PATH",
                     help="also append the Markdown summary to PATH (e.g. \"$GITHUB_STEP_SUMMARY\")")
    cmp.add_argument("--threshold", type=float, default=None, metavar="FRACTION",
                     help="report a margin that grew by at least this fraction of the tolerance (default 0.25)")
    cmp.add_argument("--known-divergences", metavar="TOML", help="known-divergences file applied to the new report")
    cmp.add_argument("--fail-on-drift", action="store_true", help="exit 1 on evidence drift too")
    cmp.add_argument("--known-regressions", choices=("fail", "warn"), default="fail",
                     help="a test that held and is now violated with a known divergence's symptom (a regression into "
                          "a known bug): fail (exit 1, the default) or warn (reported, exit 0)")
    page = sub.add_parser("html", help="render a JSON report as a self-contained HTML page")
    page.add_argument("report", help="the JSON report of a run (--dl-report)")
    page.add_argument("output", help="the HTML file to write (replaced if it exists)")
    sub.add_parser("modes", help="the documented modes a JSON report checked, per claim (--check: exit 1 on a mode "
                                 "left unchecked)", add_help=False)
    sub.add_parser("repro", help="print the standalone script that reproduces a violated test", add_help=False)
    sub.add_parser("soak", help="run the suites many times with fresh random examples; each unexpected failure "
                                "comes with the command that reproduces it", add_help=False)
    sub.add_parser("mutate", help="the mutation score: run the suites against deliberately broken frameworks",
                   add_help=False)
    sub.add_parser("merge", help="join the JSON reports of the N shards of a --dl-shard run into one report "
                                 "(-o MERGED.json [--html MERGED.html])", add_help=False)
    sub.add_parser("durations", help="write the durations file --dl-shard balances by, from JSON reports "
                                     "(-o FILE)", add_help=False)
    sub.add_parser("coverage", help="the API ledger of a --dl-api-ledger run (--api LEDGER.json); with two ledgers, "
                                    "the APIs new in the second that no test calls", add_help=False)
    return parser


#: The exit status when the reader of our output went away (128 + SIGPIPE, as a shell reports).
EXIT_BROKEN_PIPE = 141


def main(argv: Sequence[str] | None = None) -> int:
    """The ``dlconform`` command. A reader that stops reading (``dlconform modes R.json | head``)
    ends it quietly with :data:`EXIT_BROKEN_PIPE`, not a traceback: what it printed was cut
    short, so the status is not success."""
    try:
        return _main(argv)
    except BrokenPipeError:
        import os

        # Python flushes stdout again at exit: point it at /dev/null so that flush cannot fail too.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_BROKEN_PIPE


def _main(argv: Sequence[str] | None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] and argv[0] in DELEGATED:
        # Everything after "run" belongs to pytest, options included (argparse would refuse a
        # leading "-n 2"); the others parse their own arguments.
        return _delegate(argv[0], argv[1:])
    parser = _parser()
    args, rest = parser.parse_known_args(argv)
    if args.version:
        sys.stdout.write(version_text())
        return 0
    if args.command in DELEGATED:  # reached only with an option before it
        return _delegate(args.command, rest)
    if rest:
        parser.error(f"unrecognized arguments: {' '.join(rest)}")
    if args.command is None:
        parser.print_help(sys.stdout)
        return 0
    if args.command == "claims":
        return _claims(args)
    if args.command == "compare":
        return _compare(args)
    return _html(args)


def _delegate(command: str, argv: list[str]) -> int:
    if command == "run":
        return _run(argv)
    if command == "model":
        return _model(argv)
    if command == "soak":
        from .core import soak

        return soak.main(argv)
    if command == "mutate":
        from .run.mutants import runner

        return runner.main(argv)
    if command == "merge":
        from .report import merge

        return merge.main(argv)
    if command == "durations":
        from .run import shards

        return shards.main(argv)
    if command == "coverage":
        from .report import api_coverage

        return api_coverage.main(argv)
    if command == "modes":
        from .report import modes

        return modes.main(argv)
    from .report import repro

    return repro.main(argv)


def version_text() -> str:
    """This package's version and the frameworks' versions, from installed metadata only
    (importing a framework takes seconds and may fail; the version must not)."""
    from importlib import metadata

    from . import __version__
    from .run.settings import FRAMEWORK_CHOICES, framework_version

    def dist(name: str) -> str | None:
        try:
            return metadata.version(name)
        except metadata.PackageNotFoundError:
            return None

    lines = [f"pytest-dlconform {dist('pytest-dlconform') or __version__} (Python {sys.version.split()[0]})"]
    versions = {fw: framework_version(fw) for fw in FRAMEWORK_CHOICES}
    versions.update({name: dist(name) for name in ("keras", "pytest", "hypothesis")})
    lines += [f"{name} {version or 'not installed'}" for name, version in versions.items()]
    return "\n".join(lines) + "\n"


def _claims(args: argparse.Namespace) -> int:
    from .core import claims as registry
    from .report import ledger

    if args.check is not None:
        return ledger.print_coverage(args.check or None)
    unmatched = registry.unmatched(args.globs)
    if unmatched:
        glob = unmatched[0]
        sys.stderr.write(f"dlconform claims: {glob!r} matches no registered claim id; {registry.no_match_hint(glob)}\n")
        return EXIT_USAGE
    return ledger.print_ledger(args.globs, fmt=args.format)


def _run(pytest_args: Sequence[str], *, announce: bool = True) -> int:
    import os
    import subprocess

    from .run.settings import PACKAGED_DIVERGENCES_VAR

    # The packaged known divergences become --dl-divergences's default (settings._divergences),
    # so a flag, the environment variable or an ini key the user set still decides.
    env = dict(os.environ, **{PACKAGED_DIVERGENCES_VAR: "1"})
    if "-h" in pytest_args or "--help" in pytest_args:
        sys.stdout.write(RUN_PREFACE)
        sys.stdout.flush()
    package = SUITES_PACKAGE
    if _names_a_model(pytest_args):
        # A model named on the command line is what the run is for: its claims, not the 2,000-odd
        # framework tests besides (`pytest --pyargs pytest_dlconform.suites --dl-model ...` runs both).
        package = MODEL_SUITES
        if announce:
            sys.stderr.write(f"dlconform run: --dl-model given: running only the model suites ({MODEL_SUITES}); "
                             f"`pytest --pyargs {SUITES_PACKAGE} --dl-model ...` runs every suite with it\n")
    # pytest runs in a fresh interpreter: this one has imported pytest_dlconform already, so
    # pytest.main here could not assert-rewrite the plugin and printed a
    # PytestAssertRewriteWarning (a 160-column line) at the end of every installed user's run.
    sys.stdout.flush()
    from .core.scheduling import xdist_args

    proc = subprocess.Popen([sys.executable, "-m", "pytest", "--pyargs", package, "-p", "no:cacheprovider",
                             *xdist_args(pytest_args), *pytest_args], env=env)
    while True:
        try:
            return proc.wait()
        except KeyboardInterrupt:  # the child had the same Ctrl-C: it ends its run and reports
            continue


def _names_a_model(args: Sequence[str]) -> bool:
    return any(a == "--dl-model" or a.startswith("--dl-model=") for a in args)


def _model(argv: Sequence[str]) -> int:
    """``dlconform model REF [--quick] [PYTEST ARGS]``: the model suites for that factory, with
    the shipped known divergences (as ``dlconform run``) and the ci profile unless --quick."""
    args = list(argv)
    if not args or args[0] in ("-h", "--help"):
        sys.stdout.write(MODEL_USAGE)
        return 0 if args else EXIT_USAGE
    ref, rest = args[0], args[1:]
    if ":" not in ref or ref.startswith("-"):
        sys.stderr.write(f"dlconform model: {ref!r} is not MODULE:FACTORY (e.g. mypackage.models:make_model); "
                         "name the function that builds your model\n")
        return EXIT_USAGE
    quick = "--quick" in rest
    rest = [a for a in rest if a != "--quick"]
    profile = [] if any(a.startswith("--dl-profile") for a in rest) else [f"--dl-profile={'quick' if quick else 'ci'}"]
    return _run([f"--dl-model={ref}", *profile, *rest], announce=False)


def _compare(args: argparse.Namespace) -> int:
    from .report import compare

    threshold = compare.DEFAULT_DRIFT if args.threshold is None else args.threshold
    if not threshold > 0:
        sys.stderr.write(f"dlconform compare: --threshold {args.threshold} must be a positive fraction of the tolerance\n")
        return compare.EXIT_UNUSABLE
    try:
        if args.last:
            if args.old or args.new:
                raise compare.UnusableReport("--last compares the two newest saved reports: give no report path "
                                             "with it (or drop --last)")
            args.old, args.new = compare.last_two(args.saved)
            sys.stderr.write(f"dlconform compare: --last: {args.old} -> {args.new}\n")
        elif not (args.old and args.new):
            raise compare.UnusableReport("give two reports, OLD.json NEW.json, or --last for the two newest "
                                         "saved ones")
        elif args.saved:
            raise compare.UnusableReport("--saved goes with --last")
        result = compare.run(args.old, args.new, threshold=threshold, divergences_path=args.known_divergences,
                             known_regressions=args.known_regressions)
    except compare.UnusableReport as exc:
        sys.stderr.write(f"dlconform compare: {exc}\n")
        return compare.EXIT_UNUSABLE
    if args.format == "json":
        sys.stdout.write(compare.to_json(result))
    elif args.format == "markdown":
        sys.stdout.write(compare.to_markdown(result, verbose=args.verbose))
    else:
        sys.stdout.write(compare.to_text(result, verbose=args.verbose))
    if args.markdown_file:
        try:
            with open(args.markdown_file, "a", encoding="utf-8") as fh:
                fh.write(compare.to_markdown(result, verbose=args.verbose))
        except OSError as exc:
            sys.stderr.write(f"dlconform compare: cannot write --markdown-file {args.markdown_file}: {exc}\n")
            return compare.EXIT_UNUSABLE
    if args.fail_on_drift and result.drift:
        return compare.EXIT_REGRESSED
    return result.exit_code


def _html(args: argparse.Namespace) -> int:
    from .report import compare, html, results

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
