"""The measured API ledger against the installed torch: the enumeration is deterministic and
versioned from the package, and a tiny real run records exactly the public callables its
claim test calls."""

from __future__ import annotations

import json
from importlib import metadata

import pytest

torch = pytest.importorskip("torch")

from pytest_dlconform.report import api_coverage, api_ledger  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning", "ignore::FutureWarning")


def test_the_enumeration_is_deterministic_and_reads_the_version_from_the_package() -> None:
    first, second = api_ledger.Catalog(), api_ledger.Catalog()
    api_ledger.enumerate_namespaces(first, ["torch"])
    api_ledger.enumerate_namespaces(second, ["torch"])
    assert json.dumps(first.as_json()) == json.dumps(second.as_json())
    functional = first.namespaces["torch.nn.functional"]
    assert functional["version"] == metadata.version("torch")
    assert list(functional["entries"]) == sorted(functional["entries"])
    assert {"relu": "function", "gelu": "function"}.items() <= functional["entries"].items()
    assert "handle_torch_function" not in functional["entries"]  # imported for its own use, not its API
    assert first.namespaces["torch.nn"]["entries"]["Linear"] == "class"
    assert "all_reduce" in first.namespaces["torch.distributed"]["entries"]
    api_coverage.validate(api_coverage.load_out_of_scope(), first.as_json())  # the packaged names exist here


def test_the_recorder_credits_direct_calls_not_the_frameworks_own() -> None:
    catalog = api_ledger.Catalog()
    api_ledger.enumerate_namespaces(catalog, ["torch"])
    x = torch.ones(2, 3)
    with api_ledger.Recorder(catalog) as recorder:
        torch.nn.functional.relu(x)
        layer = torch.nn.Linear(3, 4)
        layer(x)
        torch.nn.functional.max_pool2d(torch.ones(1, 1, 4, 4), 2)  # a boolean_dispatch function
        torch.nn.functional.conv2d(torch.ones(1, 1, 3, 3), torch.ones(1, 1, 2, 2))  # a builtin
    # Linear.forward calls F.linear (a builtin) and Module.__init__: the framework's calls, not ours.
    assert recorder.hits == {"torch.nn.functional.relu", "torch.nn.Linear", "torch.nn.functional.max_pool2d",
                             "torch.nn.functional.conv2d"}


CLAIM_TEST = """
import pytest
import torch


@pytest.mark.claim("autodiff.tape.watch")
def test_uses_relu_and_linear():
    x = torch.ones(2, 3)
    torch.nn.Linear(3, 4)(torch.nn.functional.relu(x))
"""


def test_a_run_records_exactly_the_public_callables_its_test_calls(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\naddopts = -p no:cacheprovider\n")
    pytester.makepyfile(test_fake=CLAIM_TEST)
    result = pytester.runpytest_subprocess("--dl-framework=torch", "--dl-api-ledger=ledger.json",
                                           "-W", "ignore::DeprecationWarning")
    assert result.ret == 0, result.stdout.str()
    result.stdout.fnmatch_lines(["*API ledger written to *ledger.json*"])
    doc = json.loads((pytester.path / "ledger.json").read_text())
    [record] = doc["tests"].values()
    assert record == {"claim": "autodiff.tape.watch", "apis": ["torch.nn.Linear", "torch.nn.functional.relu"]}
    functional = doc["namespaces"]["torch.nn.functional"]["apis"]
    assert functional["relu"]["status"] == "covered" and functional["gelu"]["status"] == "uncovered"
    assert doc["namespaces"]["torch.nn"]["apis"]["Linear"]["status"] == "covered"
    assert functional["upsample"]["status"] == "out of scope"
    assert (pytester.path / "ledger.html").read_text().startswith("<!doctype html>")
