"""Location-independent examples: the same claim test, run from two folders (so two node
ids), draws the same per-test seed and the same derandomized hypothesis examples, and its
report records that seed. Claim tests that need no framework, so the runs stay cheap; the
installed-wheel case is tests/integration/test_installed_wheel.py."""

from __future__ import annotations

import json

import pytest

LOCATED = """
import json
import os
import random

import pytest
from hypothesis import given, strategies as st


def _log(request, **drawn):
    with open(os.environ["DRAWN_OUT"], "a") as fh:
        fh.write(json.dumps({"test": request.node.name, **drawn}) + "\\n")


@pytest.mark.claim("autodiff.tape.nested")
@pytest.mark.parametrize("k", [1, 2])
@given(x=st.integers(-10**6, 10**6), y=st.floats(-1, 1))
def test_drawn(request, k, x, y):
    _log(request, x=x, y=y, r=random.random())


@pytest.mark.claim("autodiff.tape.watch")
def test_seeded(request, dl_seed):
    _log(request, seed=dl_seed, r=random.random())
"""


def _run(suite: pytest.Pytester, where: str, monkeypatch: pytest.MonkeyPatch) -> tuple[list[dict], dict[str, int]]:
    folder = suite.path.joinpath(*where.split("/"), "suites", "autodiff")
    folder.mkdir(parents=True)
    (folder / "test_located.py").write_text(LOCATED)
    out = suite.path / f"{where.replace('/', '-')}.jsonl"
    monkeypatch.setenv("DRAWN_OUT", str(out))
    report = suite.path / f"{where.replace('/', '-')}.json"
    # rootdir is suite.path for both, so the node ids differ by the folders above suites/.
    result = suite.runpytest_subprocess(str(folder), "-p", "no:xdist", "--dl-profile=ci", f"--dl-report={report}")
    result.assert_outcomes(passed=3)
    seeds = {t["nodeid"].partition("suites/")[2]: t["seed"]
             for c in json.loads(report.read_text())["claims"].values() for t in c["tests"]}
    return [json.loads(line) for line in out.read_text().splitlines()], seeds


def test_two_folders_draw_the_same_seeds_and_examples(suite: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    drawn_a, seeds_a = _run(suite, "checkout", monkeypatch)
    drawn_b, seeds_b = _run(suite, "venv/lib/site-packages/pytest_dlconform", monkeypatch)
    assert len(seeds_a) == 3 and all(isinstance(s, int) for s in seeds_a.values()), seeds_a
    assert seeds_a == seeds_b, "the report's per-test seeds depend on where the suites live"
    assert len(drawn_a) > 3 and drawn_a == drawn_b, "hypothesis drew other examples (or seeded otherwise) elsewhere"
    # ... while the two parametrizations of one test still draw apart.
    k1 = [d["x"] for d in drawn_a if d["test"].endswith("[1]")]
    k2 = [d["x"] for d in drawn_a if d["test"].endswith("[2]")]
    assert k1 and k1 != k2
    seeded = next(d for d in drawn_a if d["test"] == "test_seeded")
    assert seeded["seed"] == seeds_a["autodiff/test_located.py::test_seeded"]
