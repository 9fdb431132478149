"""What --dl-profile=quick collects from the shipped suites: every claim of a ci run keeps at
least one test, and the compiled-backward suite keeps its stratified sample (every mode, one
op of every family per mode), the same for a seed and another for the next seed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from pytest_dlconform.run import profiles

ROOT = Path(__file__).resolve().parents[2]
SUITE = "suites/execution/test_compiled_backward.py"
# A plugin for the collecting pytest: the claim of every selected test, written to $DUMP.
DUMP_PLUGIN = '''
import json, os

def pytest_collection_finish(session):
    out = [[item.nodeid, str(m.args[0]) if m and m.args else None]
           for item in session.items for m in [item.get_closest_marker("claim")]]
    with open(os.environ["DLCONFORM_TEST_DUMP"], "w") as f:
        json.dump(out, f)
'''


def _collect(tmp_path: Path, name: str, *args: str) -> list[tuple[str, str | None]]:
    (tmp_path / "dumpclaims.py").write_text(DUMP_PLUGIN)
    dump = tmp_path / f"{name}.json"
    env = {**os.environ, "DLCONFORM_TEST_DUMP": str(dump),
           "PYTHONPATH": os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")])}
    out = subprocess.run([sys.executable, "-m", "pytest", "-p", "dumpclaims", "-p", "no:cacheprovider", "-p", "no:xdist",
                          "-p", "no:randomly", "--collect-only", "-q", *args], cwd=ROOT, env=env, capture_output=True,
                         text=True, timeout=600)
    assert dump.exists(), out.stdout[-3000:] + out.stderr[-3000:]
    return [(nodeid, claim) for nodeid, claim in json.loads(dump.read_text())]


def test_every_claim_collects_at_least_one_test_in_quick(tmp_path: Path) -> None:
    ci = _collect(tmp_path, "ci", "--pyargs", "pytest_dlconform.suites", "--dl-profile=ci")
    quick = _collect(tmp_path, "quick", "--pyargs", "pytest_dlconform.suites", "--dl-profile=quick")
    ci_claims = {claim for _, claim in ci if claim}
    assert len(ci_claims) > 50
    assert {claim for _, claim in quick if claim} == ci_claims
    # The compiled-backward suite is sampled; the per-op eager suite is not.
    ops = [n for n, _ in ci if "autodiff/test_ops.py" in n]
    assert ops and ops == [n for n, _ in quick if "autodiff/test_ops.py" in n]
    assert len([n for n, _ in quick if "test_compiled_backward" in n]) < len([n for n, _ in ci
                                                                              if "test_compiled_backward" in n]) / 4


def _mode_op(nodeid: str) -> tuple[str, str]:
    test, params = nodeid.split("::")[1].split("[", 1)
    _device, *rest = params.rstrip("]").split("-")
    if "apart" in test:
        return "apart", "-".join(rest)
    if "inductor" in test:
        return "inductor", "-".join(rest)
    return rest[0], "-".join(rest[1:])


def test_the_compiled_sample_is_seeded_stratified_and_deselects_the_rest(tmp_path: Path) -> None:
    runs = {name: _collect(tmp_path, name, SUITE, "--dl-profile=quick", f"--dl-seed={seed}")
            for name, seed in (("a", 4), ("b", 4), ("c", 5))}
    assert runs["a"] == runs["b"]
    assert runs["a"] != runs["c"]
    fams = profiles.families()
    for name, seed in (("a", 4), ("c", 5)):
        pairs = [_mode_op(n) for n, _ in runs[name]]
        sample = profiles.quick_compiled_sample(seed)
        by_mode: dict[str, set[str]] = {}
        for mode, op in pairs:
            by_mode.setdefault(mode, set()).add(op)
        apart = by_mode.pop("apart", set())
        assert by_mode == {mode: set(ops) for mode, ops in sample.items()}
        for ops in by_mode.values():
            assert all(len(ops & set(members)) == 1 for members in fams.values())
        assert all(key.split("-")[0] in sample["inductor"] for key in apart)
    ci = _collect(tmp_path, "ci", SUITE, "--dl-profile=ci")
    assert len(ci) > 5 * len(runs["a"])


def test_low_precision_and_second_order_keep_one_op_of_every_family_per_mode(tmp_path: Path) -> None:
    """The quick profile's other per-op samples (profiles.QUICK_OP_SUITES): per dtype of the
    low-precision suite (both frameworks), per framework and derivative mode of the second-order
    suite, exactly the ops of quick_op_sample for the seed; the ci profile keeps every op."""
    suites = ("suites/autodiff/test_low_precision.py", "suites/autodiff/test_second_order.py")
    seed = 6
    quick = [n for n, _ in _collect(tmp_path, "quick", *suites, "--dl-profile=quick", f"--dl-seed={seed}")]
    ci = [n for n, _ in _collect(tmp_path, "ci", *suites, "--dl-profile=ci")]
    found: dict[tuple[str, str], set[str]] = {}
    for nodeid in quick:
        test, params = nodeid.split("::")[1].split("[", 1)
        parts = params.rstrip("]").split("-")
        if "low_precision" in nodeid:  # [framework-device-op-dtype]
            framework = {"tf": "tensorflow"}.get(parts[0], parts[0])
            key = ("low-precision", f"{framework}/{parts[-1]}")
            op = "-".join(parts[2:-1])
        else:  # test_<framework>_op_hvp_<mode>[device-op]
            framework = "torch" if test.startswith("test_torch") else "tensorflow"
            mode = "reverse-over-reverse" if test.endswith("reverse_over_reverse") else "forward-over-reverse"
            key, op = ("second-order", f"{framework}/{mode}"), "-".join(parts[1:])
        found.setdefault(key, set()).add(op)
    low, second = profiles.quick_op_sample("low-precision", seed), profiles.quick_op_sample("second-order", seed)
    expected = {("low-precision", f"{fw}/{dtype}"): set(ops) for dtype, ops in low.items()
                for fw in ("tensorflow", "torch")}
    expected.update({("second-order", mode): set(ops) for mode, ops in second.items()})
    assert found == expected
    assert all(len(ops) == len(profiles.families()) for ops in expected.values())
    assert len(ci) > 7 * len(quick)


def test_quick_leaves_out_the_second_jax_configuration_of_the_keras_backends(tmp_path: Path) -> None:
    suite = "suites/interop/test_keras_backends.py"
    quick = [n for n, _ in _collect(tmp_path, "quick", suite, "--dl-profile=quick")]
    ci = [n for n, _ in _collect(tmp_path, "ci", suite, "--dl-profile=ci")]
    assert sorted(n for n in ci if n not in quick) == [
        f"{suite}::test_float64_keras_model_computes_in_float64_on_both_backends[cpu-jax-x64]"]
    assert any("[cpu-jax]" in n for n in quick) and len(ci) == 7
