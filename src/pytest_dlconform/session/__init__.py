"""One conformance run: the :class:`Run` a pytest session has once dlconform is active.

:mod:`pytest_dlconform.plugin` forwards pytest hooks here; this package holds the logic so
that it can be read (and tested) without the hook plumbing. ``Run`` is put together from
one part per role, each in its own module:

- :mod:`.workers`: devices found and selected, the share of each xdist worker, the
  framework and strategy fixtures;
- :mod:`.collection`: parametrization and selection of claim tests;
- :mod:`.guard`: seeds, the default device and the global-state check around each test;
- :mod:`.outcome`: the report, the matrix, the files and the exit status at the end.

What is left here is the run's state and settings, its hypothesis budget and its stack.
"""

from __future__ import annotations

import os
from typing import Any

import pytest

from .. import devices, profiles, results
from .. import settings as opts
from ..activation import MARKERS
from ..frameworks import adapter
from .collection import DESELECTED, FIXTURE_FRAMEWORK, ITEM_KEY, SHORT, Collection, ItemInfo
from .guard import EVIDENCE_KEY, VERDICT_KEY, Guard
from .outcome import Outcome
from .workers import Workers

__all__ = [
    "DESELECTED", "EVIDENCE_KEY", "FIXTURE_FRAMEWORK", "ITEM_KEY", "MARKERS", "SHORT", "VERDICT_KEY", "ItemInfo", "Run",
    "settings_from_config",
]


def settings_from_config(config: pytest.Config) -> opts.Settings:
    cli = {name: config.getoption(f"dl_{name}") for name in opts.HELP}
    ini = {name: config.getini(opts.ini_key(name)) for name in opts.HELP}
    try:
        return opts.build(opts.make_lookup(cli, os.environ, ini))
    except opts.SettingsError as exc:
        raise pytest.UsageError(str(exc)) from None


class Run(Workers, Collection, Guard, Outcome):
    def __init__(self, config: pytest.Config, settings: opts.Settings) -> None:
        self.config = config
        self.settings = settings
        self.collector = results.Collector()
        self.divergences: list[Any] = []  # known divergences, matched where each test runs (from_config loads them)
        self.workerinput: dict[str, Any] | None = getattr(config, "workerinput", None)
        _quiet_framework_logs(config)
        self.inventory_text, self.kinds, self.threads = self._devices()
        # Read once: each call scans installed distributions' metadata, and collection
        # would otherwise repeat it for every test function and item.
        self.installed = opts.installed_frameworks()
        # TensorFlow's logical CPU devices: one per replica when the run covers the CPU, at
        # least 3 so the distributed suites always run 2 and 3 replicas (distribution.cpu_replicas).
        from ..distribution.handles import cpu_replicas

        self.logical_cpus = cpu_replicas(self.settings.replicas) if "cpu" in self.kinds else 1
        # ... and logical GPUs: a one-GPU run splits its GPU so multi-replica claims run (devices.logical_gpus).
        tf_adapter: Any = adapter("tensorflow")  # TensorFlowAdapter: logical_gpus is its own attribute
        tf_adapter.logical_gpus = devices.logical_gpus(self.kinds, self.settings.replicas)

    @classmethod
    def from_config(cls, config: pytest.Config) -> Run:
        run = cls(config, settings_from_config(config))
        if run.settings.examples_db and config.getoption("hypothesis_seed", None) is not None:
            raise pytest.UsageError(
                f"--hypothesis-seed={config.getoption('hypothesis_seed')} with {opts.flag(opts.EXAMPLES_DB)}="
                f"{run.settings.examples_db}: hypothesis ignores the example database under a fixed seed; drop one "
                "(the database reproduces its failures with --dl-profile=replay)")
        if run.workerinput is None:
            _validate_input_files(config, run.settings)
            from .. import usermodels

            usermodels.validate(run.settings)  # --dl-model factories: a usage error before any test runs
        run.divergences = _load_divergences(run.settings)
        return run


    def budget(self) -> Any:
        """The hypothesis budget of claim tests: the --dl-profile, or the user's --hypothesis-profile."""
        cached = getattr(self, "_budget", None)
        if cached is None:
            from hypothesis import settings

            if self.config.getoption("hypothesis_profile", None):
                cached = settings.default  # hypothesis's plugin loaded the profile the user named
            else:
                profiles.register()
                cached = settings.get_profile(profiles.PREFIX + self.settings.profile)
            if self.settings.examples_db:
                from hypothesis.database import DirectoryBasedExampleDatabase

                cached = settings(cached, database=DirectoryBasedExampleDatabase(self.settings.examples_db))
            self._budget = cached
        return cached

    def apply_budgets(self, items: list[pytest.Item]) -> None:
        """Lay the run's budget over each selected claim test's own hypothesis settings."""
        from .. import budgets

        budget = self.budget()
        budgets.set_active(budget)
        label = f"{self.settings.profile}:{id(budget)}"
        modules = {}
        for item in items:
            if item.stash.get(ITEM_KEY, None) is not None:
                budgets.apply_to(getattr(item, "function", None), budget, label)
                module = getattr(item, "module", None)
                if module is not None:
                    modules[module.__name__] = module
        # A property defined at module level and called by a claim test (a `_helper` with
        # @given) was decorated at import, so as_default cannot reach it: give it the budget too.
        for module in modules.values():
            for obj in list(vars(module).values()):
                if getattr(obj, "is_hypothesis_test", False):
                    budgets.apply_to(obj, budget, label)

    def match_divergence(self, test: dict[str, Any], failure: Any) -> Any:
        from .. import divergences

        if not self.divergences:
            return None
        return divergences.match_failure(self.divergences, test, failure, self.environment())

    def divergence_elsewhere(self, test: dict[str, Any], failure: Any) -> Any:
        """The entry a violated test would match but for the version (divergences.match_elsewhere)."""
        from .. import divergences

        if not self.divergences:
            return None
        return divergences.match_elsewhere(self.divergences, test, failure, self.environment())

    def environment(self) -> dict[str, Any]:
        """The stack of this run (versions, devices, settings), computed once."""
        cached: dict[str, Any] | None = getattr(self, "_environment", None)
        if cached is None:
            cached = self._environment = self._compute_environment()
        return cached

    def _compute_environment(self) -> dict[str, Any]:
        s = self.settings
        versions = {fw: opts.framework_version(fw) or "not installed" for fw in opts.FRAMEWORK_CHOICES}
        for extra in ("keras", "numpy", "hypothesis", "pytest", "pytest-xdist", "ml-dtypes", "jax", "pytest-dlconform"):
            versions[extra] = _dist_version(extra)
        settings_dict = {
            "device": s.device, "selected_devices": list(self.kinds), "frameworks": list(s.frameworks),
            "strategies": list(s.strategies), "replicas": s.replicas, "claims": list(s.claims),
            "profile": s.profile, "seed": s.seed, "hypothesis_profile": self.config.getoption("hypothesis_profile", None),
            # the seed that picked a randomized run's examples (explore, quick): rerun with it
            "hypothesis_seed": self.config.getoption("hypothesis_seed", None), "examples_db": s.examples_db,
            "allow_listen_all": s.allow_listen_all,  # --dl-allow-listen-all: TensorFlow cluster servers on all interfaces
            "divergences": s.divergences,  # the known-divergences file the verdicts were judged with
        }
        inventory = getattr(self, "_inventory", None)  # the controller's discovery (workers: their share)
        gpu = devices.gpu_details(inventory if inventory is not None else devices.discover())
        return results.environment(settings_dict, versions, self.inventory_text, gpu)


def _validate_input_files(config: pytest.Config, settings: opts.Settings) -> None:
    """A baseline or known-divergences file that cannot be used stops the run before it starts."""
    from .. import compare, divergences

    try:
        if settings.divergences:
            divergences.load(settings.divergences)
        if settings.baseline:
            compare.load(settings.baseline, "baseline")
    except divergences.DivergenceError as exc:
        raise pytest.UsageError(f"{opts.flag(opts.DIVERGENCES)} (from {settings.describe(opts.DIVERGENCES)}): {exc}") from None
    except compare.UnusableReport as exc:
        raise pytest.UsageError(f"{opts.flag(opts.BASELINE)} (from {settings.describe(opts.BASELINE)}): {exc}") from None


def _quiet_framework_logs(config: pytest.Config) -> None:
    """TensorFlow's C++ logging (INFO and WARNING lines such as ``util.cc:163] Not handling
    type DT_DOUBLE``) off in this process and every child it starts, unless the user set
    TF_CPP_MIN_LOG_LEVEL or asked for detail with -v."""
    if config.get_verbosity() <= 0:
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def _load_divergences(settings: opts.Settings) -> list[Any]:
    from .. import divergences

    if not settings.divergences:
        return []
    try:
        return divergences.load(settings.divergences)
    except divergences.DivergenceError:
        return []  # the controller reports it (a usage error before any test runs)


def _dist_version(name: str) -> str:
    from importlib import metadata

    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return "not installed"
