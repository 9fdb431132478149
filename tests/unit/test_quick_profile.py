"""The quick profile's purpose: every claim, every op in eager, and a stratified, seeded
sample of the compiled-backward suite (profiles.quick_compiled_sample), which the coverage
ledger expects of a quick report and names as left out by design."""

from __future__ import annotations

from typing import Any

from pytest_dlconform.programs.samples import COMPILED_MODES, coverage_key, registered, samples
from pytest_dlconform.report import coverage
from pytest_dlconform.run import profiles

SEEDS = range(12)


def _suite_modes() -> dict[str, tuple[str, ...]]:
    """compiled/<mode> -> dtypes, per the registry."""
    return {mode.split("/", 1)[1]: dtypes for modes in COMPILED_MODES.values() for mode, dtypes in modes.items()}


def test_the_sample_is_deterministic_for_a_seed() -> None:
    for seed in SEEDS:
        assert profiles.quick_compiled_sample(seed) == profiles.quick_compiled_sample(seed)


def test_every_compiled_mode_and_dtype_is_in_the_sample() -> None:
    assert set(profiles.COMPILED_SUITE_MODES) == set(_suite_modes())
    for seed in SEEDS:
        sample = profiles.quick_compiled_sample(seed)
        assert set(sample) == set(_suite_modes())
        # every test of the suite checks each dtype of its mode, so a mode with an op covers them all
        assert all(sample[mode] for mode in sample)


def test_every_op_family_is_compiled_in_every_mode() -> None:
    fams = profiles.families()
    assert len(fams) >= 10
    for seed in SEEDS:
        for mode, ops in profiles.quick_compiled_sample(seed).items():
            for family, members in fams.items():
                assert len(set(ops) & set(members)) == 1, (seed, mode, family)


def test_the_sample_rotates_with_the_seed_and_covers_every_op() -> None:
    a, b = profiles.quick_compiled_sample(0), profiles.quick_compiled_sample(1)
    assert all(a[mode] != b[mode] for mode in a)
    longest = max(len(ops) for ops in profiles.families().values())
    for mode in profiles.COMPILED_SUITE_MODES:
        seen = {op for seed in range(longest) for op in profiles.quick_compiled_sample(seed)[mode]}
        assert seen == {op for ops in profiles.families().values() for op in ops}, mode


def test_modes_of_one_run_take_different_ops_of_a_large_family() -> None:
    sample = profiles.quick_compiled_sample(7)
    for family, members in profiles.families().items():
        if len(members) >= len(profiles.COMPILED_SUITE_MODES):
            picked = [next(op for op in sample[mode] if op in members) for mode in profiles.COMPILED_SUITE_MODES]
            assert len(set(picked)) == len(picked), family


def test_other_profiles_compile_every_op() -> None:
    everything = profiles.compiled_ops("ci", 0, "inductor")
    assert len(everything) > 90
    for profile in ("ci", "thorough", "explore", "replay"):
        assert profiles.compiled_ops(profile, 3, "xla") == everything
    assert set(profiles.compiled_ops("quick", 3, "xla")) < set(everything)


def _report(profile: str, seed: int, rows: list[dict[str, Any]]) -> dict[str, Any]:
    test = {"nodeid": "t", "verdict": "holds", "evidence": {"notes": {"coverage": rows}}}
    return {"environment": {"profile": profile, "seed": seed}, "claims": {"c": {"tests": [test]}}}


def _rows(framework: str, mode: str, ops: Any, dtypes: tuple[str, ...]) -> list[dict[str, Any]]:
    return [{**coverage_key(framework, f"compiled/{mode}", s, dtype=d), "count": 1} for op in ops for s in samples(op)
            for d in dtypes]


def test_the_ledger_expects_the_quick_subset_of_a_quick_report() -> None:
    seed = 5
    sample = profiles.quick_compiled_sample(seed)
    dtypes = _suite_modes()
    rows = [r for mode in ("aot_eager", "inductor") for r in _rows("torch", mode, sample[mode], dtypes[mode])]
    led = coverage.ledger(_report("quick", seed, rows), registered())
    assert led is not None and led["unvisited"] == []
    sub = led["profile_subset"]
    assert sub["expected"] == len(rows) < sub["in_scope"] and sub["left_out"] == sub["in_scope"] - len(rows)
    line = coverage.subset_line(led)
    assert line is not None and line.startswith(f"quick profile: {len(rows)} of {sub['in_scope']} combinations")
    assert "by design" in line
    # The same rows under another seed miss that seed's sample: unvisited, as in a ci report.
    other = coverage.ledger(_report("quick", seed + 1, rows), registered())
    assert other is not None and other["unvisited"]
    ci = coverage.ledger(_report("ci", seed, rows), registered())
    assert ci is not None and len(ci["unvisited"]) == sub["in_scope"] - len(rows) and "profile_subset" not in ci
    assert coverage.subset_line(ci) is None


def test_a_quick_report_missing_a_sampled_op_is_unvisited() -> None:
    seed = 2
    sample = profiles.quick_compiled_sample(seed)
    ops = sample["xla"][1:]
    led = coverage.ledger(_report("quick", seed, _rows("tensorflow", "xla", ops, ("float64", "float32"))), registered())
    assert led is not None
    assert {r["op"] for r in led["unvisited"]} == {sample["xla"][0]}


def test_modes_check_of_a_quick_report_names_what_it_left_out_by_design(tmp_path: Any, capsys: Any) -> None:
    import json

    from pytest_dlconform.report import modes

    seed = 1
    sample = profiles.quick_compiled_sample(seed)
    rows = _rows("torch", "inductor", sample["inductor"], ("float32",))
    doc = _report("quick", seed, rows)
    test = {**doc["claims"]["c"]["tests"][0], "claim": "c", "evidence": {"modes": {"a": 1}, "notes": {"coverage": rows}}}
    claim = {"verdict": "holds", "claim": {"id": "c", "modes": ["a", "b"]}, "tests": [test]}
    doc = {**doc, "claims": {"c": claim}, "schema": "pytest-dlconform/report", "schema_version": 1, "counts": {}}
    doc["coverage"] = coverage.ledger(doc, registered())
    path = tmp_path / "quick.json"
    path.write_text(json.dumps(doc))
    assert modes.main([str(path), "--check"]) == 0
    out = capsys.readouterr().out
    assert "quick profile: " in out and "by design" in out and "c: b" in out
    doc["environment"]["profile"] = "ci"
    path.write_text(json.dumps(doc))
    assert modes.main([str(path), "--check"]) == 1


def test_second_order_judges_one_sample_per_op_and_mode_rotating_over_the_ci_samples() -> None:
    from pytest_dlconform.programs.samples import ops_for
    from pytest_dlconform.suites.autodiff import test_second_order as so

    assert so._quota("quick") == 1 and so._quota("ci") is None
    for framework in (so.TF, so.TORCH):
        for op in ops_for(framework, "reverse-fd"):
            for mode in (so.ROR, so.FOR):
                ci = so._samples(framework, mode, op, "ci", 0)
                quick = [so._samples(framework, mode, op, "quick", seed) for seed in range(len(ci))]
                assert all(sorted(map(repr, q)) == sorted(map(repr, ci)) for q in quick), (framework, op, mode)
                judged = [s for s in ci if s.regime not in so.QUICK_NOISY]
                firsts = {q[0] for q in quick}
                assert firsts == (set(judged) or {ci[0]}), (framework, op, mode)  # n seeds start at every one
                assert all(s.regime in so.QUICK_NOISY for s in quick[0][len(judged):]), (framework, op, mode)
            ror, fwd = (so._samples(framework, m, op, "quick", 0)[0] for m in (so.ROR, so.FOR))
            judged = [s for s in so._samples(framework, so.ROR, op, "ci", 0) if s.regime not in so.QUICK_NOISY]
            if framework == so.TORCH and len(judged) > 1:
                assert ror != fwd, op  # the two modes of one run start at different samples


def test_the_ledger_expects_the_low_precision_sample_of_a_quick_report() -> None:
    from pytest_dlconform.programs.samples import LOW_PRECISION_DTYPES, LOW_PRECISION_MODE

    seed = 3
    sample = profiles.quick_op_sample("low-precision", seed)
    assert set(sample) == set(LOW_PRECISION_DTYPES)
    rows = [{**coverage_key(fw, LOW_PRECISION_MODE, s, dtype=dtype), "count": 1} for fw in ("tensorflow", "torch")
            for dtype, ops in sample.items() for op in ops for s in samples(op)]
    led = coverage.ledger(_report("quick", seed, rows), registered())
    assert led is not None and led["unvisited"] == []
    assert 0 < led["profile_subset"]["expected"] < led["profile_subset"]["in_scope"]
    dropped = sample["bfloat16"][0]
    fewer = [r for r in rows if not (r["op"] == dropped and r["dtype"] == "bfloat16" and r["framework"] == "torch")]
    led = coverage.ledger(_report("quick", seed, fewer), registered())
    assert led is not None
    assert {(r["framework"], r["op"], r["dtype"]) for r in led["unvisited"]} == {("torch", dropped, "bfloat16")}
    ci = coverage.ledger(_report("ci", seed, rows), registered())
    assert ci is not None and len(ci["unvisited"]) == led["profile_subset"]["left_out"]


def test_each_sampled_suite_takes_one_op_of_every_family_per_mode_and_rotates() -> None:
    fams = profiles.families()
    every = {op for ops in fams.values() for op in ops}
    longest = max(len(ops) for ops in fams.values())
    for suite, modes in profiles.QUICK_OP_SUITES.items():
        for seed in SEEDS:
            sample = profiles.quick_op_sample(suite, seed)
            assert tuple(sample) == modes
            assert all(len(set(ops) & set(members)) == 1 for ops in sample.values() for members in fams.values())
        for mode in modes:
            assert {op for seed in range(longest) for op in profiles.quick_op_sample(suite, seed)[mode]} == every


def test_quick_compiles_one_inductor_mode_per_run_and_successive_seeds_take_each() -> None:
    from pytest_dlconform.suites.execution import test_compile as tc

    for profile in ("ci", "thorough", "explore", "replay"):
        assert tc.inductor_modes(profile, 3) == tc.INDUCTOR_MODES
    n = len(tc.INDUCTOR_MODES)
    assert all(len(tc.inductor_modes("quick", seed)) == 1 for seed in range(n))
    assert {tc.inductor_modes("quick", seed)[0] for seed in range(n)} == set(tc.INDUCTOR_MODES)
