"""The shard planner (--dl-shard): balanced within the LPT bound, deterministic, disjoint,
complete; the durations file and its fallbacks; the option's validation."""

from __future__ import annotations

import itertools
import json
import random
from pathlib import Path

import pytest

from pytest_dlconform.run import settings as opts
from pytest_dlconform.run import shards
from pytest_dlconform.run.shards import Durations, Job


def _jobs(rng: random.Random, n: int) -> list[Job]:
    return [Job(f"t{i:03d}", round(rng.choice([rng.uniform(0, 1), rng.uniform(1, 30)]), 3), (f"t{i:03d}",))
            for i in range(n)]


def _optimum(jobs: list[Job], count: int) -> float:
    best = float("inf")
    for assignment in itertools.product(range(count), repeat=len(jobs)):
        loads = [0.0] * count
        for job, b in zip(jobs, assignment):
            loads[b] += job.seconds
        best = min(best, max(loads))
    return best


@pytest.mark.parametrize("seed", range(12))
def test_the_longest_shard_is_within_the_lpt_bound_of_the_best_split(seed: int) -> None:
    rng = random.Random(seed)
    count, jobs = rng.choice([2, 3]), _jobs(rng, rng.randint(4, 8))
    makespan = max(sum(j.seconds for j in b) for b in shards.plan(jobs, count))
    assert makespan <= (4 / 3 - 1 / (3 * count)) * _optimum(jobs, count) + 1e-9


def test_a_plan_is_deterministic_disjoint_and_covers_every_job() -> None:
    jobs = _jobs(random.Random(7), 300)
    first = shards.plan(jobs, 4)
    assert shards.plan(list(reversed(jobs)), 4) == first  # the order of collection does not matter
    keys = [j.key for b in first for j in b]
    assert sorted(keys) == sorted(j.key for j in jobs) and len(set(keys)) == len(keys)
    loads = [sum(j.seconds for j in b) for b in first]
    assert max(loads) - min(loads) <= max(j.seconds for j in jobs)


def test_ties_are_broken_by_key_so_equal_tests_always_land_alike() -> None:
    jobs = [Job(k, 1.0, (k,)) for k in ("d", "b", "a", "c")]
    assert [[j.key for j in b] for b in shards.plan(jobs, 2)] == [["a", "c"], ["b", "d"]]


def test_a_group_is_one_job_with_the_sum_of_its_tests() -> None:
    est = {"a": 5.0, "b": 1.0, "c": 2.0}
    jobs = shards.jobs_of([("a", None, "g"), ("b", None, None), ("c", None, "g")], lambda k, c: est[k])
    by_key = {j.key: j for j in jobs}
    assert by_key["g"].seconds == 7.0 and set(by_key["g"].tests) == {"a", "c"}
    assert by_key["b"].tests == ("b",)


def test_an_unknown_test_is_estimated_by_its_claim_then_area_then_everything() -> None:
    d = Durations.from_document({"claims": {"data.x.a": {"k1": 1.0, "k2": 3.0}, "data.y": {"k3": 10.0},
                                            "autodiff.z": {"k4": 100.0}}})
    est = d.estimator()
    assert est("k1", "data.x.a") == 1.0
    assert est("new", "data.x.a") == 2.0  # the claim's median
    assert est("new", "data.other") == 3.0  # the area's median (1, 3, 10)
    assert est("new", "export.q") == 6.5  # everything's median
    assert Durations({}, {}).estimator()("new", None) == shards.DEFAULT_SECONDS


def test_keys_do_not_depend_on_where_the_suites_are_installed() -> None:
    node = "autodiff/test_x.py::test_y[tf-cpu]"
    assert shards.test_key(f"suites/{node}") == shards.test_key(
        f"../venv/lib/python3.11/site-packages/pytest_dlconform/suites/{node}") == node


def test_the_durations_file_is_the_median_per_test_over_the_reports(tmp_path: Path) -> None:
    def report(seconds: float) -> dict:
        return {"claims": {"data.a": {"tests": [{"nodeid": "suites/data/t.py::t", "claim": "data.a",
                                                 "duration_s": seconds}]}}}
    doc = shards.durations_document([report(1.0), report(2.0), report(9.0)])
    assert doc["claims"] == {"data.a": {"data/t.py::t": 2.0}} and doc["schema"] == shards.DURATIONS_SCHEMA
    path = tmp_path / "d.json"
    path.write_text(json.dumps(doc))
    loaded = shards.load_durations(str(path))
    assert loaded.seconds == {"data/t.py::t": 2.0} and loaded.digest


def test_the_packaged_durations_file_loads_and_knows_the_suites() -> None:
    d = shards.load_durations()
    assert len(d.seconds) > 1000 and all(not k.startswith("suites/") for k in d.seconds)


@pytest.mark.parametrize(("value", "problem"), [
    ("0/4", "shard 0 of 4 does not exist"), ("5/4", "shard 5 of 4 does not exist"), ("1/0", "at least 1"),
    ("two", "not a shard I/N"), ("1/4/2", "not a shard I/N"),
])
def test_a_bad_shard_is_a_one_line_error_naming_value_and_source(value: str, problem: str) -> None:
    lookup = opts.make_lookup({"shard": value}, {}, {})
    with pytest.raises(opts.SettingsError) as info:
        opts.build(lookup, installed=("torch",))
    text = str(info.value)
    assert "\n" not in text and f"--dl-shard={value!r} (from --dl-shard)" in text and problem in text


def test_a_shard_from_the_environment_is_read_and_validated() -> None:
    s = opts.build(opts.make_lookup({}, {"DLCONFORM_SHARD": " 2 / 3 "}, {}), installed=("torch",))
    assert s.shard == (2, 3)
    with pytest.raises(opts.SettingsError, match="environment variable DLCONFORM_SHARD"):
        opts.build(opts.make_lookup({}, {"DLCONFORM_SHARD": "4/3"}, {}), installed=("torch",))
