"""A claim test's identity and seeds (session/identity.py): the same test wherever the
package, the rootdir or the user's files live; different tests, parameters or run seeds
apart. No pytest runs, no frameworks."""

from __future__ import annotations

import zlib
from pathlib import PurePosixPath, PureWindowsPath

import pytest

from pytest_dlconform.run.session import identity

TEST = "data/test_tfdata.py::TestShuffle::test_reshuffles_each_epoch[tf-cpu]"
LOCAL = "suites/" + TEST


def _installs() -> list[tuple[str, PurePosixPath | PureWindowsPath | None, tuple]]:
    """(node id, resolved file, suites package folders) of one shipped test in several installs."""
    rel = PurePosixPath(TEST.partition("::")[0])
    rest = "::" + TEST.partition("::")[2]
    checkout = PurePosixPath("/work/main/suites")
    venv = PurePosixPath("/tmp/pytest-of-ci/venv0/lib/python3.11/site-packages/pytest_dlconform/suites")
    tox = PurePosixPath("/home/u/proj/.tox/tf221/lib/python3.12/site-packages/pytest_dlconform/suites")
    runner = PureWindowsPath(r"C:\actions-runner\_work\venv\Lib\site-packages\pytest_dlconform\suites")
    return [
        ("suites/" + rel.as_posix() + rest, checkout / rel, (checkout,)),  # editable checkout, rootdir = repo
        ("../../tmp/pytest-of-ci/venv0/lib/python3.11/site-packages/pytest_dlconform/suites/"
         + rel.as_posix() + rest, venv / rel, (venv,)),  # a wheel in a venv, run from a project elsewhere
        ("lib/python3.12/site-packages/pytest_dlconform/suites/" + rel.as_posix() + rest, tox / rel, (tox,)),  # tox env
        ("pytest_dlconform/suites/" + rel.as_posix() + rest, runner / PureWindowsPath(*rel.parts), (runner,)),  # CI, Windows
        # The checkout's suites/ run while another copy of the package is installed (tox's usedevelop=false).
        ("suites/" + rel.as_posix() + rest, checkout / rel, (tox,)),
        # No file known (a report's node id alone): the same, from the node id's suites/ folder.
        (r"lib\site-packages\pytest_dlconform\suites" + "\\" + str(PureWindowsPath(*rel.parts)) + rest, None, ()),
    ]


@pytest.mark.parametrize("nodeid, path, dirs", _installs())
def test_one_test_has_one_identity_and_seed_in_every_install(nodeid: str, path, dirs) -> None:
    got = identity.claim_identity(nodeid, path, dirs)
    assert got == LOCAL, f"identity={got!r}, but should be {LOCAL!r} [claim_identity({nodeid!r}, {path}, {dirs})]"
    assert identity.claim_seed(0, got) == identity.claim_seed(0, LOCAL)
    assert identity.hypothesis_key(got) == LOCAL.encode()


def test_a_checkout_run_keeps_the_seeds_it_always_drew() -> None:
    # A checkout's node id is its identity, so seeds cited from checkout runs stay valid:
    # tests/integration/test_false_alarms.py's dropout rate is this test's seed at --dl-seed 2027.
    nodeid = "suites/modules/test_dropout.py::test_torch_dropout2d_drops_whole_channels[cpu-drawn]"
    assert identity.claim_identity(nodeid) == nodeid
    assert identity.claim_seed(2027, nodeid) == 1523238156 == zlib.crc32(f"2027:{nodeid}".encode()) & 0x7FFFFFFF


@pytest.mark.parametrize("other", [
    "suites/data/test_tfdata.py::TestShuffle::test_reshuffles_each_epoch[torch-cpu]",  # another parameter
    "suites/data/test_tfdata.py::TestShuffle::test_reshuffles_each_epoch[tf-gpu]",  # another device
    "suites/data/test_tfdata.py::TestShuffle::test_keeps_order[tf-cpu]",  # another function
    "suites/data/test_tfdata.py::TestBatch::test_reshuffles_each_epoch[tf-cpu]",  # another class
    "suites/data/test_torch_loader.py::TestShuffle::test_reshuffles_each_epoch[tf-cpu]",  # another module
    "suites/modules/test_tfdata.py::TestShuffle::test_reshuffles_each_epoch[tf-cpu]",  # another area
])
def test_other_tests_get_other_seeds(other: str) -> None:
    assert identity.claim_identity(other) != LOCAL
    assert identity.claim_seed(0, identity.claim_identity(other)) != identity.claim_seed(0, LOCAL)
    assert identity.hypothesis_key(identity.claim_identity(other)) != identity.hypothesis_key(LOCAL)


def test_the_run_seed_changes_the_test_seed_but_not_hypothesis_key() -> None:
    assert identity.claim_seed(0, LOCAL) != identity.claim_seed(1, LOCAL)
    assert identity.claim_seed("7", LOCAL) == identity.claim_seed(7, LOCAL)
    assert 0 <= identity.claim_seed(2**40, LOCAL) < 2**31


def test_a_user_model_is_named_by_its_reference_not_its_file() -> None:
    # suites/model tests are parametrized by the 'module:factory' reference: where the user's
    # file lives (their checkout, site-packages) is in neither the node id nor the identity.
    rest = "::test_gradients_match_finite_differences[mymodels.gan:generator-torch-cpu]"
    a = identity.claim_identity("suites/model/test_gradients.py" + rest)
    b = identity.claim_identity(".venv/lib/python3.11/site-packages/pytest_dlconform/suites/model/test_gradients.py" + rest)
    assert a == b == "suites/model/test_gradients.py" + rest
    other = identity.claim_identity("suites/model/test_gradients.py" + rest.replace("gan:generator", "gan:critic"))
    assert identity.claim_seed(0, other) != identity.claim_seed(0, a)


@pytest.mark.parametrize("nodeid, expected", [
    ("tests/test_mine.py::test_x[tf-cpu]", "tests/test_mine.py::test_x[tf-cpu]"),  # rootdir-relative: kept
    ("./tests/test_mine.py::test_x[tf-cpu]", "tests/test_mine.py::test_x[tf-cpu]"),
    ("../elsewhere/test_mine.py::test_x[tf-cpu]", "test_mine.py::test_x[tf-cpu]"),  # outside the rootdir
    ("/home/u/elsewhere/test_mine.py::test_x[tf-cpu]", "test_mine.py::test_x[tf-cpu]"),
    ("mysuites/test_mine.py::test_x", "mysuites/test_mine.py::test_x"),  # only a folder named suites is cut at
    ("test_mine.py::test_x[a/b::c]", "test_mine.py::test_x[a/b::c]"),  # parameter ids are kept as they are
])
def test_a_projects_own_claim_tests_are_named_from_the_rootdir(nodeid: str, expected: str) -> None:
    assert identity.claim_identity(nodeid) == expected


def test_a_file_outside_the_suites_package_is_not_named_by_it() -> None:
    dirs = (PurePosixPath("/site/pytest_dlconform/suites"),)
    got = identity.claim_identity("tests/test_x.py::test_y", PurePosixPath("/proj/tests/test_x.py"), dirs)
    assert got == "tests/test_x.py::test_y"
