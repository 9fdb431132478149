"""The reproduce lines (session/recipe.py): a shipped test by its --pyargs name, a user's by its
path after cd, the run's settings that change what a test draws, the header's selection. No
pytest runs, no frameworks (tests/integration/test_reproduce_lines.py runs the lines)."""

from __future__ import annotations

import shlex
from pathlib import Path

from pytest_dlconform.run import settings as opts
from pytest_dlconform.run.session import identity, recipe

SUITES = Path("/venv/lib/python3.11/site-packages/pytest_dlconform/suites")
HERE = Path("/home/u/proj")
TORCH = opts.Settings(frameworks=("torch",), device="auto")


def test_a_shipped_test_is_named_by_its_module_from_any_folder() -> None:
    line = recipe.test_line("../../venv/x/suites/data/test_torch_loader.py::TestX::test_y[cpu-a b]",
                            SUITES / "data/test_torch_loader.py", HERE, (SUITES,), TORCH, {"device": "cpu"})
    assert line == ("pytest --pyargs 'pytest_dlconform.suites.data.test_torch_loader::TestX::test_y[cpu-a b]' "
                    "--dl-profile=ci --dl-seed=0 --dl-framework=torch --dl-replicas=2 --dl-device=cpu")
    # pytest's own node id of a module given to --pyargs alone has no file part: the path decides
    bare = recipe.test_line("::test_y[cpu]", SUITES / "data/test_torch_loader.py", HERE, (SUITES,), TORCH, {"device": "cpu"})
    assert bare.startswith("pytest --pyargs 'pytest_dlconform.suites.data.test_torch_loader::test_y[cpu]'")
    assert shlex.split(line)[2] == "pytest_dlconform.suites.data.test_torch_loader::TestX::test_y[cpu-a b]"


def test_a_model_test_passes_its_model_and_imports_it_from_the_run_folder() -> None:
    s = opts.Settings(frameworks=("torch",), models=("examples.gan:generator", "examples.bert:encoder"))
    nodeid = "model/test_determinism.py::test_same_seed[examples.gan:generator-torch-cpu]"
    line = recipe.test_line(nodeid, SUITES / "model/test_determinism.py", HERE, (SUITES,), s,
                            {"device": "cpu", "framework": "torch", "model": "examples.gan:generator"})
    assert line.startswith("cd /home/u/proj && pytest --pyargs "
                           "'pytest_dlconform.suites.model.test_determinism::test_same_seed[examples.gan:generator-torch-cpu]' ")
    assert line.endswith("--dl-device=cpu --dl-model=examples.gan:generator")  # this test's model only


def test_a_users_test_is_named_by_its_path_from_where_pytest_ran() -> None:
    line = recipe.test_line("tests/test_mine.py::test_x[a]", HERE / "tests/test_mine.py", HERE, (SUITES,), TORCH, {})
    assert line.startswith("cd /home/u/proj && pytest 'tests/test_mine.py::test_x[a]' --dl-profile=ci")
    assert "--dl-device=auto" in line
    # outside the folder pytest ran in: the absolute path (a node id there would not resolve)
    far = recipe.test_line("::test_x", Path("/srv/claims/test_far.py"), HERE, (SUITES,), TORCH, {})
    assert far.startswith("cd /home/u/proj && pytest /srv/claims/test_far.py::test_x ")
    # a suites/ folder of the user's own is not the package's
    own = recipe.test_line("suites/test_a.py::test_a", HERE / "suites/test_a.py", HERE, (SUITES,), TORCH, {})
    assert "--pyargs" not in own


def test_the_settings_that_change_what_a_test_draws_are_passed() -> None:
    s = opts.Settings(frameworks=("tensorflow", "torch"), profile="explore", seed=7, replicas=3,
                      strategies=("mirrored", "ddp"), divergences="/etc/my divergences.toml", timeout=30.0,
                      allow_listen_all=True, sources={"divergences": "--dl-divergences", "timeout": "--dl-timeout"})
    got = recipe.flags(s, hypothesis_seed=1234, params={"device": "gpu", "strategy": "mirrored"})
    assert got == ["--dl-profile=explore", "--dl-seed=7", "--dl-framework=tensorflow,torch", "--dl-replicas=3",
                   "--dl-device=gpu", "--dl-strategy=mirrored", "--dl-divergences='/etc/my divergences.toml'",
                   "--dl-timeout=30", "--dl-allow-listen-all=yes", "--hypothesis-seed=1234"]
    # `dlconform run`'s packaged file is its default: not passed; an example database is
    packaged = opts.Settings(frameworks=("torch",), divergences="/x/known_divergences.toml", examples_db="/db",
                             profile="replay")
    assert recipe.flags(packaged)[-1:] == ["--dl-examples-db=/db"]
    assert not any(f.startswith("--dl-divergences") for f in recipe.flags(packaged))
    shipped = opts.Settings(frameworks=("torch",), divergences=opts.packaged_divergences(),
                            sources={"divergences": "--dl-divergences"})  # as `dlconform mutate` passes it
    assert not any(f.startswith("--dl-divergences") for f in recipe.flags(shipped))
    assert "--dl-divergences=" in recipe.run_line(["t.py"], pyargs=False, here=HERE, suites_dirs=(), s=shipped,
                                                  dlconform_run=False)  # a plain pytest run has none by default


def test_the_header_reruns_the_runs_selection() -> None:
    dirs = (Path(__file__).resolve().parents[2] / "suites",)  # the checkout's, as under an editable install
    s = opts.Settings(frameworks=("torch",), claims=("data.*",), device="cpu")
    run = recipe.run_line([identity.SUITES_PACKAGE], pyargs=True, here=HERE, suites_dirs=dirs, s=s, dlconform_run=True)
    assert run == ("dlconform run --dl-profile=ci --dl-seed=0 --dl-framework=torch --dl-replicas=2 --dl-device=cpu "
                   "--dl-claims='data.*'")
    checkout = dirs[0].parent
    pyargs = recipe.run_line(["suites/data/test_torch_loader.py::test_x", "pytest_dlconform.suites.model"], pyargs=True,
                             here=checkout, suites_dirs=dirs, s=opts.Settings(frameworks=("torch",)),
                             dlconform_run=False, keyword="shuffle and not slow")
    assert pyargs.startswith("pytest --pyargs pytest_dlconform.suites.data.test_torch_loader::test_x ")
    assert pyargs.endswith(" -k 'shuffle and not slow'") and "cd " not in pyargs and "--dl-claims" not in pyargs
    # a bare `pytest` in a user's project: its folder
    bare = recipe.run_line([str(HERE)], pyargs=False, here=HERE, suites_dirs=dirs, s=s, dlconform_run=False)
    assert bare.startswith("cd /home/u/proj && pytest --dl-profile=ci")
    mine = recipe.run_line(["tests/claims"], pyargs=False, here=HERE, suites_dirs=dirs, s=s, dlconform_run=False)
    assert mine.startswith("cd /home/u/proj && pytest tests/claims --dl-profile=ci")


def test_package_name_of_files_and_folders() -> None:
    assert identity.package_name(SUITES / "data/test_tfdata.py", (SUITES,)) == "pytest_dlconform.suites.data.test_tfdata"
    assert identity.package_name(SUITES / "data", (SUITES,)) == "pytest_dlconform.suites.data"
    assert identity.package_name(SUITES, (SUITES,)) == "pytest_dlconform.suites"
    assert identity.package_name(HERE / "suites/test_a.py", (SUITES,)) is None
