"""Around each claim test: seeds derived from the run seed and the test's identity inside
the package (:mod:`.identity`, never the install path), the test's device as the default
one, its evidence recorder, and a check that it left global framework state (and Python's
and numpy's random state) as it found it."""

from __future__ import annotations

import contextlib
import os
import random
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from ...core import claims as registry
from ...core import evidence
from ...frameworks import HarnessError, adapter, state_diff
from ...report import results
from .. import settings as opts
from . import identity, recipe
from .collection import ITEM_KEY

EVIDENCE_KEY = pytest.StashKey[evidence.Recorder]()
VERDICT_KEY = pytest.StashKey[str]()


class Guard:
    """Around each claim test of one process: its seeds, its default device, its evidence
    recorder, the global-state check, and the command that reruns it."""

    def __init__(self, settings: opts.Settings, kinds: tuple[str, ...],
                 params: Callable[[pytest.Item], dict[str, str]]) -> None:
        self.settings = settings
        self.kinds = kinds
        self.params = params  # the test's parameters as the report names them (Collection.params)

    def test_identity(self, node: pytest.Item) -> str:
        """The test inside the package (``suites/data/test_tfdata.py::test_x[tf-cpu]``, a
        checkout's node id), wherever the package, the rootdir or the user's files are: what
        its seeds and hypothesis examples come from."""
        path = getattr(node, "path", None)
        resolved = Path(os.path.realpath(path)) if path is not None else None
        return identity.claim_identity(node.nodeid, resolved, identity.suites_dirs())

    def test_seed(self, node: pytest.Item) -> int:
        return identity.claim_seed(self.settings.seed, self.test_identity(node))

    def pin_examples(self, node: pytest.Item) -> None:
        """Key a claim test's hypothesis examples by its identity, not its node id.

        Hypothesis's pytest plugin gives each parametrized test its node id as extra digest
        (``_hypothesis_internal_add_digest``, set in its ``pytest_runtest_call``), and the
        digest seeds a derandomized run (ci, thorough) and keys the example database: the
        examples moved with the install path. Called from ``pytest_pyfunc_call``, after that."""
        obj = getattr(node, "obj", None)
        inner = getattr(getattr(obj, "hypothesis", None), "inner_test", None)
        if inner is None or not getattr(obj, "is_hypothesis_test", False) or node.stash.get(ITEM_KEY, None) is None:
            return
        inner._hypothesis_internal_add_digest = identity.hypothesis_key(self.test_identity(node))

    @contextlib.contextmanager
    def around(self, node: pytest.Item) -> Iterator[None]:
        info = node.stash.get(ITEM_KEY, None)
        if info is None:
            yield
            return
        seed = self.test_seed(node)
        if all(name != results.PROP_SEED for name, _ in node.user_properties):
            node.user_properties.append((results.PROP_SEED, seed))  # on every phase's report: the report's "seed"
            node.user_properties.append((results.PROP_IDENTITY, self.test_identity(node)))
        if info.problem:
            raise HarnessError(info.problem)
        if info.not_applicable:
            pytest.skip(results.NOT_APPLICABLE_PREFIX + info.not_applicable)
        loaded = [fw for fw in opts.FRAMEWORK_CHOICES if fw in sys.modules]
        before = {fw: adapter(fw).snapshot() for fw in loaded}
        rng = (random.getstate(), _numpy_state())
        self._seed_everything(seed, loaded)
        claim = registry.get(info.claim)
        declared = claim.modes if claim else None
        with evidence.recording(declared) as recorder, self._device_scope(info.params.get("device"), loaded):
            node.stash[EVIDENCE_KEY] = recorder
            yield
        random.setstate(rng[0])
        _restore_numpy_state(rng[1])
        leaks = []
        for fw, state in before.items():
            after = adapter(fw).snapshot()
            leaks += state_diff(state, after)
            adapter(fw).restore(state)
        if leaks:
            pytest.fail(
                "this test changed global framework state and did not restore it: " + "; ".join(leaks)
                + " (restored now; use a context manager or try/finally in the test)",
                pytrace=False,
            )

    @contextlib.contextmanager
    def _device_scope(self, kind: str | None, loaded: list[str]) -> Iterator[None]:
        """Make the test's device kind the default one, where there is a choice at all."""
        if kind is None or not any(k != "cpu" for k in self.kinds):
            yield
            return
        with contextlib.ExitStack() as stack:
            if "tensorflow" in loaded:
                tf = adapter("tensorflow").module
                stack.enter_context(tf.device(adapter("tensorflow").device("cpu" if kind == "cpu" else "gpu")))
            if "torch" in loaded:
                torch = adapter("torch").module
                previous = torch.get_default_device()
                torch.set_default_device(adapter("torch").device("cpu" if kind == "cpu" else "gpu"))
                stack.callback(torch.set_default_device, previous)
            yield

    def _seed_everything(self, seed: int, loaded: list[str]) -> None:
        random.seed(seed)
        if "numpy" in sys.modules:
            sys.modules["numpy"].random.seed(seed)
        for fw in loaded:
            adapter(fw).seed(seed)

    def repro(self, item: pytest.Item) -> str:
        """The command that reruns exactly this test from any folder (:mod:`.recipe`)."""
        path = getattr(item, "path", None)
        resolved = Path(os.path.realpath(path)) if path is not None else None
        line = recipe.test_line(item.nodeid, resolved, item.config.invocation_params.dir, identity.suites_dirs(),
                                self.settings, self.params(item), item.config.getoption("hypothesis_seed", None))
        return (
            line + f"  # test seed {self.test_seed(item)}; hypothesis prints the falsifying "
            "example above and, in the ci/thorough profiles, a @reproduce_failure blob"
        )


def _numpy_state() -> Any:
    np = sys.modules.get("numpy")
    return np.random.get_state() if np is not None else None


def _restore_numpy_state(state: Any) -> None:
    if state is not None:
        sys.modules["numpy"].random.set_state(state)
