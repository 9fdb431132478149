"""Issue 12 part A (indexing with accumulation, ordering, decompositions): the ops' samples and
references, and the wrong twins (op_family_mutants_a.py) caught by the ci profile.

The per-op suite, the low-precision and the compiled-backward suites pick the ops up from the
op table; the documented conventions they cannot judge by finite differences (ties, padding
rows, exact zeros) are in suites/autodiff/test_documented_gradients.py. Here: the references
against independent constructions, the samples' guarantees (repeated indices, separated
values, separated spectra), and one subprocess run of the ci profile with the twins.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from pytest_dlconform.programs import OPS, Op, Program
from pytest_dlconform.programs import samples as S
from pytest_dlconform.programs.ops import RECORDS
from pytest_dlconform.programs.ops.decompositions import build
from pytest_dlconform.programs.ops.indexing import distinct, embedding_ids, scatter_index
from pytest_dlconform.programs.ops.ordering import K, ranks, winners

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(HERE))
import op_family_mutants_a as mutants  # noqa: E402  (this folder is the plugin's home)

INDEXING_ORDERING_DECOMPOSITIONS = ("scatter_add", "index_add", "index_put", "embedding", "sort_sep", "topk_sep",
                                    "amax_sep", "amin_sep", "cumprod", "svd", "qr", "eigh")


def test_the_family_is_in_the_table_per_op_only_with_its_classes():
    for name in INDEXING_ORDERING_DECOMPOSITIONS:
        assert name in OPS and not OPS[name].composable, name
        assert S.param_classes(name) != [S.ParamClass()], f"{name} has no parameter classes"
        assert RECORDS[name].params, f"{name}'s record has no parameter classes"


def test_drawn_indices_always_repeat():
    for seed in range(50):
        idx = scatter_index((3, 4), 0, 5, seed)
        assert all(idx[0, c] == idx[1, c] for c in range(4))
        ids = embedding_ids({"ids_shape": (2, 3), "seed": seed}, 7).reshape(-1)
        assert len(set(ids.tolist())) < ids.size
    assert distinct([2, 2, 0, 2], 4) == [2, 0, 1, 3]
    with pytest.raises(ValueError, match="do not fit"):
        distinct([0, 1, 2], 2)


def test_ordered_values_are_separated_by_more_than_the_inputs_span():
    for seed in range(20):
        r = ranks((3, 4, 2), (1,), seed)
        assert sorted(r[1, :, 0].tolist()) == [0, 1, 2, 3]
        x = np.random.default_rng(seed).uniform(-64, 64, size=(3, 4, 2))
        v = np.sort(x + K * r, axis=1)
        assert np.min(np.diff(v, axis=1)) >= K - 128
        w = winners((3, 4, 2), (0, 2), seed)
        assert np.all(np.sum(w, axis=(0, 2)) == 1)


def test_spectra_are_separated_as_the_module_derives():
    rng = np.random.default_rng(0)
    for shape in ((4, 4), (2, 4), (4, 3), (3, 3)):
        x = rng.uniform(-64, 64, size=(5, *shape))
        for frac in (0.5, 0.25):
            s = np.linalg.svd(build(x, {"frac": frac}), compute_uv=False)
            assert np.min(-np.diff(s, axis=-1), initial=np.inf) >= 2 - 2 * frac and np.min(s) >= 2 - frac
        if shape[0] == shape[1]:
            w = np.linalg.eigvalsh(build(x, {"frac": 0.5, "sym": True}))
            assert np.min(np.diff(w, axis=-1)) >= 1.0


def _one(op: str, shapes: tuple[tuple[int, ...], ...], **params: Any) -> Program:
    args = tuple(range(len(shapes))) if len(shapes) > 1 else ()
    return Program(shapes, (Op(op, tuple(params.items()), args),))


def test_references_against_independent_constructions():
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal((3, 2)), rng.standard_normal((3, 2))
    got = _one("scatter_add", ((3, 2), (3, 2)), dim=0, seed=5).numpy([a, b])
    idx = scatter_index((3, 2), 0, 3, 5)
    want = a.copy()
    for i in range(3):
        for j in range(2):
            want[idx[i, j], j] += b[i, j]
    assert np.allclose(got, want, rtol=0, atol=1e-15)
    x = rng.standard_normal((2, 3))
    y = _one("cumprod", ((2, 3),), axis=-1, exclusive=True, reverse=True).numpy([x])
    assert np.allclose(y, [[x[0, 1] * x[0, 2], x[0, 2], 1.0], [x[1, 1] * x[1, 2], x[1, 2], 1.0]])
    proj = _one("eigh", ((3, 3),), frac=0.5, out="proj", uplo="L", pair="top", sym=True)
    assert np.allclose(proj.numpy([np.arctanh(np.zeros((3, 3)))]), np.diag([0, 0, 1.0]), atol=1e-15)


def test_the_mutants_forward_values_are_right():
    torch = pytest.importorskip("torch")
    t = torch.tensor(np.arange(12.0).reshape(4, 3))
    ids = torch.tensor([0, 0, 3])
    assert torch.equal(mutants.embedding(ids, t), torch.nn.functional.embedding(ids, t))
    x = torch.tensor([[1.0, 3.0, 3.0], [0.0, 2.0, -1.0]], requires_grad=True)
    fns = mutants._torch_functions()
    assert torch.equal(fns["amax"](x, dim=-1), torch.amax(x, dim=-1))
    assert torch.equal(fns["cumprod"](x, dim=-1), torch.cumprod(x, dim=-1))


# --------------------------------------------------------------------------- the wrong twins


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    pytest.importorskip("torch")
    pytest.importorskip("tensorflow")
    report = tmp_path_factory.mktemp("indexing_ordering_decompositions") / "report.json"
    ids = sorted({i for _, caught, _ in mutants.MUTANTS.values() for i in caught} | set(mutants.UNAFFECTED))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")])}
    cmd = [sys.executable, "-m", "pytest", *[f"suites/{i}" for i in ids], "-p", "op_family_mutants_a",
           "-p", "no:cacheprovider", "--dl-profile=ci", "-q", f"--dl-report={report}"]
    out = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=1500, env=env)
    assert report.exists(), f"no report:\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}"
    doc = json.loads(report.read_text())
    return {t["nodeid"].split("suites/", 1)[-1]: t for c in doc["claims"].values() for t in c["tests"]}


@pytest.mark.parametrize("name", sorted(mutants.MUTANTS))
def test_each_wrong_twin_is_caught_with_its_message(run: dict[str, dict[str, Any]], name: str) -> None:
    what, caught, message = mutants.MUTANTS[name]
    for test_id in caught:
        assert test_id in run, f"{test_id} did not run"
        t = run[test_id]
        assert t["verdict"] == "violated", f"mutant {name} ({what}) not caught by {test_id}: {t['verdict']}"
        assert message in t["reason"], t["reason"]


def test_the_twins_are_wrong_in_one_place_only(run: dict[str, dict[str, Any]]) -> None:
    for test_id in mutants.UNAFFECTED:
        assert run[test_id]["verdict"] == "holds", f"{test_id}: {run[test_id]['verdict']}: {run[test_id]['reason']}"
