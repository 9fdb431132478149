"""The pairwise covering-array generator of the optimizer suite (suites/modules/_optim_reference.py):
every pair of values of two factors that a valid row can hold is in some row, constrained pairs
are left out only where no valid row holds them, and the construction is deterministic."""

from __future__ import annotations

import itertools

from suites.modules import _optim_reference as ref
from suites.modules import test_torch_optimizers as suite


def test_every_pair_of_every_optimizer_table_is_covered():
    for info in suite.INFOS:
        rows = suite.COVERING[info.name]
        assert all(info.valid(r) for r in rows), f"{info.name}: a covering row breaks the table's constraint"
        missing = ref.uncovered(rows, info.factors, info.valid)
        assert not missing, f"{info.name}: pairs not covered: {sorted(missing)[:5]}"
    assert not ref.uncovered(suite.ASGD_ROWS, suite.ASGD_FACTORS)


def test_pairwise_covers_all_pairs_with_fewer_rows_than_the_product():
    factors = {f"f{i}": list(range(3)) for i in range(6)}
    rows = ref.pairwise(factors)
    assert not ref.uncovered(rows, factors)
    assert len(rows) < 3 ** 6 // 10  # 729 in the product; a greedy cover needs ~15
    assert rows == ref.pairwise(factors), "the construction must be deterministic"


def test_constrained_pairs_are_required_only_where_a_valid_row_holds_them():
    factors = {"momentum": [0, 0.9], "dampening": [0, 0.5], "nesterov": [False, True]}

    def valid(r):
        return not r["nesterov"] or (r["momentum"] > 0 and r["dampening"] == 0)

    rows = ref.pairwise(factors, valid)
    assert all(valid(r) for r in rows)
    pairs = ref.required_pairs(factors, valid)
    assert ("dampening", repr(0.5), "nesterov", repr(True)) not in pairs
    assert ("momentum", repr(0.9), "nesterov", repr(True)) in pairs
    assert not ref.uncovered(rows, factors, valid)


def test_uncovered_names_a_missing_pair():
    factors = {"a": [0, 1], "b": [0, 1]}
    rows = [dict(zip("ab", v)) for v in itertools.product([0, 1], [0, 1])][:3]
    assert ref.uncovered(rows, factors) == {("a", "1", "b", "1")}
