"""--dl-model option parsing and the factory contract, without a framework (the end-to-end
checks of bad factories are in tests/plugin/test_user_models.py)."""

from __future__ import annotations

import pytest

from pytest_dlconform.run import settings as opts
from pytest_dlconform.run import usermodels


def _build(cli=None, env=None, ini=None):
    return opts.build(opts.make_lookup(cli or {}, env or {}, ini or {}), installed=("torch",))


def test_repeatable_option_env_comma_list_and_ini_lines():
    assert _build(cli={"model": ["a.b:make", "c:d", "a.b:make"]}).models == ("a.b:make", "c:d")
    assert _build(env={"DLCONFORM_MODEL": "a:b, c.d:e.f"}).models == ("a:b", "c.d:e.f")
    assert _build(ini={"model": "\n  a:b\n  c:d, e:f\n"}).models == ("a:b", "c:d", "e:f")
    assert _build().models == ()
    # precedence as for every option: command line over environment over ini
    assert _build(cli={"model": ["x:y"]}, env={"DLCONFORM_MODEL": "a:b"}, ini={"model": "c:d"}).models == ("x:y",)


@pytest.mark.parametrize("bad", ["examples.gan", ":make", "mod:", "a-b:make", "mod:make(1)", " , "])
def test_bad_reference_names_the_value_and_the_fix(bad):
    with pytest.raises(opts.SettingsError) as info:
        _build(env={"DLCONFORM_MODEL": bad})
    text = str(info.value)
    assert "--dl-model=" in text and "(from environment variable DLCONFORM_MODEL)" in text
    assert "pass e.g. --dl-model examples.gan:generator" in text and "\n" not in text


def test_factory_result_shapes():
    def inputs(seed):
        return seed

    with pytest.raises(usermodels.ModelError, match=r"returned a builtins.int"):
        usermodels.as_user_model(3)
    with pytest.raises(usermodels.ModelError, match=r"returned a builtins.tuple"):
        usermodels.as_user_model((1,))
    with pytest.raises(usermodels.ModelError, match=r"not a torch.nn.Module or a keras.Model"):
        usermodels.as_user_model(("model", inputs))


def test_factory_gets_only_the_keywords_it_takes():
    seen = []

    def plain():
        seen.append({})
        raise ValueError("stop")

    def both(device, dtype):
        seen.append({"device": device, "dtype": dtype})
        raise ValueError("stop")

    def wide(**kw):
        seen.append(kw)
        raise ValueError("stop")

    for fn in (plain, both, wide):
        with pytest.raises(usermodels.ModelError, match="the factory raised ValueError: stop"):
            usermodels.call_factory(fn, device="cpu", dtype="float64")
    assert seen == [{}, {"device": "cpu", "dtype": "float64"}, {"device": "cpu", "dtype": "float64"}]


def test_tree_comparison_is_normwise_over_the_collection_and_names_the_worst_tensor():
    import numpy as np

    from pytest_dlconform.checks.numerics import Tolerance
    from pytest_dlconform.checks.usermodel import TreeMismatch, assert_close_tree

    tol = Tolerance(1e-6, "test bound")
    want = {"w": np.array([1.0, -2.0]), "zero_in_theory": np.array([1e-14])}
    # noise of the whole computation's scale on a tensor whose exact value is zero passes ...
    assert assert_close_tree({"w": want["w"], "zero_in_theory": np.array([3e-14])}, want, tol, what="x", name="x") < 1e-6
    # ... a wrong tensor fails and is named, with its error against the collection's scale
    with pytest.raises(TreeMismatch, match=r"x: w: max\|actual - expected\| = 1.000e-05 is 5.000e-06 of the largest"):
        assert_close_tree({"w": want["w"] + [0.0, 1e-5], "zero_in_theory": want["zero_in_theory"]}, want, tol,
                          what="x", name="x")
    with pytest.raises(TreeMismatch, match="tensors"):
        assert_close_tree({"w": want["w"]}, want, tol, what="x", name="x")
    with pytest.raises(TreeMismatch, match="shape"):
        assert_close_tree({"w": want["w"][:1], "zero_in_theory": want["zero_in_theory"]}, want, tol, what="x", name="x")
    with pytest.raises(TreeMismatch):
        assert_close_tree({"w": np.array([np.nan, -2.0]), "zero_in_theory": want["zero_in_theory"]}, want, tol,
                          what="x", name="x")


def test_step_comparison_scales_with_the_largest_update():
    import numpy as np

    from pytest_dlconform.checks.numerics import Tolerance
    from pytest_dlconform.checks.reductions import StepMismatch
    from pytest_dlconform.checks.usermodel import assert_same_step

    tol = Tolerance(1e-4, "test bound")
    before = {"w": np.array([1.0, 2.0]), "key_bias": np.array([0.0])}
    single = {"w": np.array([0.9, 2.1]), "key_bias": np.array([1e-15])}  # updates 0.1; the bias moved by noise
    # noise far below rtol x the largest update on a tensor that barely moves: holds
    assert assert_same_step({"w": single["w"], "key_bias": np.array([5e-15])}, single, before, tol, what="x") < 1
    # an update that is not the single-device one (e.g. not averaged: twice as large) fails and is named
    twice = {"w": np.array([0.8, 2.2]), "key_bias": single["key_bias"]}
    with pytest.raises(StepMismatch, match=r"x: w max\|distributed - single device\| = 1.000e-01, but should be <="):
        assert_same_step(twice, single, before, tol, what="x")
    with pytest.raises(StepMismatch, match="parameters"):
        assert_same_step({"w": single["w"]}, single, before, tol, what="x")


def test_reference_diagnosis_names_the_side_that_is_wrong():
    """A failed bitwise round trip says which side left the float32 error model: each against a
    float64 reference in units of one evaluation's bound (half the comparison's tolerance)."""
    import numpy as np

    from pytest_dlconform.checks.numerics import Tolerance
    from pytest_dlconform.checks.usermodel import reference_diagnosis

    ref = {"output_0": np.array([[0.5, -1.0], [0.25, 2.0]])}
    tol = Tolerance(2e-6, "two evaluations")
    right = {"output_0": (ref["output_0"] * (1 + 1e-7)).astype(np.float32)}
    wrong = {"output_0": right["output_0"].copy()}
    wrong["output_0"][1, 1] += 1e-4  # 5e-5 of the largest magnitude, 50 x the bound of 1e-6
    text = reference_diagnosis({"the original": right, "the artifact": wrong}, ref, tol)
    original, artifact = text.split("the original ")[1].split(", the artifact ")
    assert float(original.split(" (")[1].split(" x")[0]) < 1  # within its bound
    assert 40 < float(artifact.split(" (")[1].split(" x")[0]) < 60  # named, and by how much
    assert "one float32 evaluation's bound is 1.00e-06 [half of two evaluations]" in text
    renamed = reference_diagnosis({"the artifact": {"other": wrong["output_0"]}}, ref, tol)
    assert "do not match the reference's ['output_0']" in renamed
