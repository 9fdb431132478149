"""The ``dlconform`` console script.

    dlconform claims [GLOB ...]     print the claims ledger
    dlconform run [PYTEST ARGS]     run the shipped suites (pytest --pyargs pytest_dlconform.suites)
"""

from __future__ import annotations

import argparse
import sys
from typing import Sequence

SUITES_PACKAGE = "pytest_dlconform.suites"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="dlconform", description="pytest-dlconform: deep-learning framework conformance")
    sub = parser.add_subparsers(dest="command", required=True)
    claims = sub.add_parser("claims", help="print the claims ledger")
    claims.add_argument("globs", nargs="*", default=["*"], help="claim-id globs, e.g. 'autodiff.*'")
    run = sub.add_parser("run", help="run the shipped conformance suites; extra arguments go to pytest")
    run.add_argument("pytest_args", nargs=argparse.REMAINDER)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.command == "claims":
        from .ledger import print_ledger

        return print_ledger(args.globs)
    import pytest

    return int(pytest.main(["--pyargs", SUITES_PACKAGE, "-p", "no:cacheprovider", *args.pytest_args]))


if __name__ == "__main__":
    sys.exit(main())
