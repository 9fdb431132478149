"""One conformance run: settings, devices, parametrization, selection, guards and results.

:mod:`pytest_dlconform.plugin` forwards pytest hooks here; this module holds the logic
so that it can be read (and tested) without the hook plumbing.
"""

from __future__ import annotations

import contextlib
import os
import random
import shlex
import sys
import zlib
from dataclasses import dataclass, field
from typing import Any, Iterator

import pytest

from . import claims as registry
from . import determinism, devices, evidence, profiles, results
from . import settings as opts
from .frameworks import HarnessError, adapter, state_diff
from .report import Report

ITEM_KEY = pytest.StashKey["ItemInfo"]()
EVIDENCE_KEY = pytest.StashKey[evidence.Recorder]()
VERDICT_KEY = pytest.StashKey[str]()
DESELECTED = "__dlconform_deselected__"
SHORT = {"tensorflow": "tf", "torch": "torch"}
FIXTURE_FRAMEWORK = {"tf": "tensorflow", "torch": "torch"}

from .activation import MARKERS  # noqa: E402,F401  # re-exported: registered at configure


@dataclass
class ItemInfo:
    claim: str
    params: dict[str, str]
    problem: str | None = None  # set for a test that cannot run correctly: reported as error
    not_applicable: str | None = None


def settings_from_config(config: pytest.Config) -> opts.Settings:
    cli = {name: config.getoption(f"dl_{name}") for name in opts.HELP}
    ini = {name: config.getini(opts.ini_key(name)) for name in opts.HELP}
    try:
        return opts.build(opts.make_lookup(cli, os.environ, ini))
    except opts.SettingsError as exc:
        raise pytest.UsageError(str(exc)) from None


class Run:
    def __init__(self, config: pytest.Config, settings: opts.Settings) -> None:
        self.config = config
        self.settings = settings
        self.collector = results.Collector()
        self.workerinput: dict[str, Any] | None = getattr(config, "workerinput", None)
        _quiet_framework_logs(config)
        self.inventory_text, self.kinds, self.threads = self._devices()
        # Read once: each call scans installed distributions' metadata, and collection
        # would otherwise repeat it for every test function and item.
        self.installed = opts.installed_frameworks()
        # TensorFlow's logical CPU devices: one per replica when the run covers the CPU.
        self.logical_cpus = self.settings.replicas if "cpu" in self.kinds else 1
        # ... and logical GPUs: a one-GPU run splits its GPU so multi-replica claims run (devices.logical_gpus).
        adapter("tensorflow").logical_gpus = devices.logical_gpus(self.kinds, self.settings.replicas)

    @classmethod
    def from_config(cls, config: pytest.Config) -> Run:
        run = cls(config, settings_from_config(config))
        if run.workerinput is None:
            _validate_input_files(config, run.settings)
            from . import usermodels

            usermodels.validate(run.settings)  # --dl-model factories: a usage error before any test runs
        run.divergences = _load_divergences(run.settings)
        return run

    divergences: list[Any] = []  # known divergences, matched where each test runs

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
            self._budget = cached
        return cached

    def apply_budgets(self, items: list[pytest.Item]) -> None:
        """Lay the run's budget over each selected claim test's own hypothesis settings."""
        from . import budgets

        budget = self.budget()
        budgets.set_active(budget)
        label = f"{self.settings.profile}:{id(budget)}"
        for item in items:
            if item.stash.get(ITEM_KEY, None) is not None:
                budgets.apply_to(getattr(item, "function", None), budget, label)

    def match_divergence(self, test: dict[str, Any], failure: Any) -> Any:
        from . import divergences

        if not self.divergences:
            return None
        return divergences.match_failure(self.divergences, test, failure, self.environment())

    # ------------------------------------------------------------ devices and workers

    def _devices(self) -> tuple[str, tuple[str, ...], int | None]:
        if self.workerinput is not None and "dlconform_kinds" in self.workerinput:
            # A worker never re-discovers: collection must not depend on what it sees.
            wi = self.workerinput
            os.environ["CUDA_VISIBLE_DEVICES"] = wi[devices.WORKER_GPUS_KEY]
            self._visible_gpus = tuple(devices.visible_tokens(wi[devices.WORKER_GPUS_KEY]))
            self.gpu_lock = wi.get(devices.GPU_LOCK_KEY)
            threads = int(wi["dlconform_threads"])
            for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
                os.environ[var] = str(threads)
            if any(k != devices.CPU for k in wi["dlconform_kinds"]):
                os.environ.setdefault("TF_FORCE_GPU_ALLOW_GROWTH", "true")
                os.environ.setdefault(*determinism.CUBLAS_ENV)
            return wi["dlconform_inventory"], tuple(wi["dlconform_kinds"]), threads
        inventory = devices.discover()
        try:
            kinds = devices.select(self.settings.device, inventory, self.settings.describe(opts.DEVICE))
        except devices.DeviceError as exc:
            raise pytest.UsageError(str(exc)) from None
        self._inventory = inventory
        self._visible_gpus = inventory.gpu_ids if kinds != (devices.CPU,) else ()
        self.gpu_lock = None  # one process: nothing to take turns with
        if self._visible_gpus:
            # What this process and every child (ranks, fresh interpreters) use is what was
            # found: by UUID, so CUDA's device order cannot change it. A child TensorFlow
            # must not take the memory of the GPU this process already uses.
            os.environ.setdefault("CUDA_VISIBLE_DEVICES", ",".join(self._visible_gpus))
            os.environ.setdefault("TF_FORCE_GPU_ALLOW_GROWTH", "true")
            os.environ.setdefault(*determinism.CUBLAS_ENV)  # before cuBLAS starts: bitwise claims
        return inventory.describe(), kinds, None

    def worker_input(self, node: Any, n_workers: int | None = None) -> dict[str, Any]:
        # -n N sets numprocesses and leaves --tx empty; --tx lists the workers itself.
        numprocesses = getattr(self.config.option, "numprocesses", None)
        tx = getattr(self.config.option, "tx", None) or []
        if n_workers is None:
            n_workers = max(1, numprocesses if isinstance(numprocesses, int) and numprocesses > 0 else len(tx))
        index = int(str(node.gateway.id).removeprefix("gw") or 0)
        wi = {
            "dlconform_kinds": list(self.kinds),
            "dlconform_inventory": self.inventory_text,
            devices.WORKER_GPUS_KEY: devices.worker_gpus(index, n_workers, self.kinds, self._inventory),
            "dlconform_threads": devices.threads_per_worker(n_workers, self._inventory.cpu_count),
        }
        if devices.MULTI_GPU in self.kinds:  # workers that all see every GPU take turns (devices.gpu_lock)
            import tempfile

            wi[devices.GPU_LOCK_KEY] = os.path.join(tempfile.gettempdir(), f"dlconform-gpus-{os.getpid()}.lock")
        return wi

    def configure_frameworks(self) -> None:
        for fw in self.settings.frameworks:
            adapter(fw).configure(threads=self.threads, logical_cpus=self.logical_cpus)

    def header_lines(self) -> list[str]:
        s = self.settings
        versions = ", ".join(f"{fw} {opts.framework_version(fw)}" for fw in s.frameworks)
        recipe = (
            f"--dl-device={s.device} --dl-framework={','.join(s.frameworks)} --dl-profile={s.profile} "
            f"--dl-seed={s.seed} --dl-replicas={s.replicas}"
        )
        return [
            f"dlconform: {versions}; devices found: {self.inventory_text}; selected: {', '.join(self.kinds)}",
            f"dlconform: reproduce with: pytest {recipe} --dl-claims={','.join(s.claims)}",
        ]

    # ------------------------------------------------------------ parametrization and selection

    def _frameworks_for(self, claim_id: str | None) -> list[str]:
        claim = registry.get(claim_id) if claim_id else None
        candidates = claim.frameworks if claim else opts.FRAMEWORK_CHOICES
        installed = self.installed
        # Installed but not asked for: leave out. Not installed: keep, reported "not applicable".
        return [fw for fw in candidates if fw in self.settings.frameworks or fw not in installed]

    def parametrize(self, metafunc: pytest.Metafunc) -> None:
        names = metafunc.fixturenames
        marker = metafunc.definition.get_closest_marker("claim")
        claim_id = marker.args[0] if marker and marker.args else None
        frameworks = self._frameworks_for(claim_id)
        if "dl_model" in names:  # the model.* suites: registered models (with their strategies)
            from . import usermodels

            usermodels.parametrize(metafunc, self)
        elif "dl_strategy" in names:
            fixed = [FIXTURE_FRAMEWORK[n] for n in ("tf", "torch") if n in names]
            fws = fixed or frameworks
            pairs = [(fw, s) for fw in fws for s in self.settings.strategies_for(fw)]
            values = pairs or [DESELECTED]
            ids = [f"{SHORT[fw]}-{s}" for fw, s in pairs] or ["deselected"]
            if "dl_framework" in names:
                argvalues = [(p[0], p) for p in pairs] or [(DESELECTED, DESELECTED)]
                metafunc.parametrize(["dl_framework", "dl_strategy"], argvalues, ids=ids, indirect=True, scope="session")
            else:
                metafunc.parametrize("dl_strategy", values, ids=ids, indirect=True, scope="session")
        elif "dl_framework" in names:
            metafunc.parametrize(
                "dl_framework", frameworks or [DESELECTED], ids=[SHORT[f] for f in frameworks] or ["deselected"],
                indirect=True, scope="session",
            )
        if "dl_device" in names:
            metafunc.parametrize("dl_device", list(self.kinds), indirect=True, scope="session")

    def select(self, config: pytest.Config, items: list[pytest.Item]) -> None:
        keep: list[pytest.Item] = []
        dropped: list[pytest.Item] = []
        explicit_claims = opts.CLAIMS in self.settings.sources
        for item in items:
            marker = item.get_closest_marker("claim")
            claim_id = str(marker.args[0]) if marker and marker.args else None
            params = self._params(item)
            if DESELECTED in params.values() or self._unselected_framework(item):
                dropped.append(item)
                continue
            if claim_id is None:
                (dropped if explicit_claims else keep).append(item)
                continue
            if not self.settings.claim_selected(claim_id):
                dropped.append(item)
                continue
            item.stash[ITEM_KEY] = self._item_info(item, claim_id, params)
            keep.append(item)
        if dropped:
            config.hook.pytest_deselected(items=dropped)
            items[:] = keep

    def _params(self, item: pytest.Item) -> dict[str, str]:
        callspec = getattr(item, "callspec", None)
        raw = dict(callspec.params) if callspec else {}
        params: dict[str, str] = {}
        fw = raw.get("dl_framework") or next((FIXTURE_FRAMEWORK[n] for n in ("tf", "torch") if n in item.fixturenames), None)
        strategy = raw.get("dl_strategy")
        if strategy == DESELECTED or fw == DESELECTED:
            return {"framework": DESELECTED}
        if isinstance(strategy, tuple):
            fw, strategy = strategy
        model = raw.get("dl_model")
        if model == DESELECTED:
            return {"framework": DESELECTED}
        if isinstance(model, tuple):  # (framework, 'module:factory'): usermodels.parametrize
            fw = fw or model[0] or None
        if "tf" in item.fixturenames and "torch" in item.fixturenames:
            fw = "tf+torch"
        if fw:
            params["framework"] = SHORT.get(fw, fw)
        if "dl_device" in raw:
            params["device"] = str(raw["dl_device"])
        if strategy:
            params["strategy"] = str(strategy)
        if isinstance(model, tuple):
            params["model"] = str(model[1])
        if "keras_backend" in raw:  # interop.keras-backends: one verdict per Keras backend
            params["backend"] = str(raw["keras_backend"])
        return params

    def _unselected_framework(self, item: pytest.Item) -> bool:
        installed = self.installed
        for name, fw in FIXTURE_FRAMEWORK.items():
            if name in item.fixturenames and fw in installed and fw not in self.settings.frameworks:
                return True
        return False

    def _item_info(self, item: pytest.Item, claim_id: str, params: dict[str, str]) -> ItemInfo:
        info = ItemInfo(claim_id, params)
        if registry.get(claim_id) is None:
            info.problem = (
                f"unknown claim id {claim_id!r}: register it in pytest_dlconform/claims/"
                f"{claim_id.split('.')[0]}.toml or fix the @pytest.mark.claim(...) id"
            )
        need = item.get_closest_marker("min_devices")
        if need and params.get("device"):
            have = self.device_count(params["device"])
            if have < int(need.args[0]):
                info.not_applicable = (
                    f"needs {need.args[0]} {params['device']} devices, this run has {have} "
                    f"({self.inventory_text}; --dl-replicas={self.settings.replicas})"
                )
        return info

    def device_count(self, kind: str) -> int:
        """Devices of ``kind`` a test of this process can use: logical CPU devices on cpu,
        the logical GPUs of the one GPU on gpu (devices.logical_gpus), the GPUs on multi-gpu.
        From what the controller found or gave this worker, never from the environment
        (without xdist nobody sets CUDA_VISIBLE_DEVICES)."""
        if kind == "cpu":
            return self.settings.replicas
        gpus = len(self._visible_gpus)
        if kind == "gpu":
            return devices.logical_gpus(self.kinds, self.settings.replicas) if gpus else 0
        return gpus

    # ------------------------------------------------------------ fixtures

    def framework_fixture(self, name: str) -> Any:
        installed = self.installed
        if name not in installed:
            pytest.skip(
                f"{results.NOT_APPLICABLE_PREFIX}{name} is not installed: "
                f"{opts.FRAMEWORK_INSTALL_HINT[name]}"
            )
        ad = adapter(name)
        ad.configure(threads=self.threads, logical_cpus=self.logical_cpus)
        return ad

    def strategy_fixture(self, param: tuple[str, str], device: str) -> Any:
        from .distribution import StrategyHandle

        fw, name = param
        self.framework_fixture(fw)
        return StrategyHandle(framework=fw, name=name, replicas=self.settings.replicas, device=device)

    def test_seed(self, node: pytest.Item) -> int:
        return zlib.crc32(f"{self.settings.seed}:{node.nodeid}".encode()) & 0x7FFFFFFF

    @contextlib.contextmanager
    def guard(self, node: pytest.Item) -> Iterator[None]:
        info = node.stash.get(ITEM_KEY, None)
        if info is None:
            yield
            return
        if info.problem:
            raise HarnessError(info.problem)
        if info.not_applicable:
            pytest.skip(results.NOT_APPLICABLE_PREFIX + info.not_applicable)
        loaded = [fw for fw in opts.FRAMEWORK_CHOICES if fw in sys.modules]
        before = {fw: adapter(fw).snapshot() for fw in loaded}
        rng = (random.getstate(), _numpy_state())
        self._seed_everything(self.test_seed(node), loaded)
        with evidence.recording() as recorder, self._device_scope(info.params.get("device"), loaded):
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
        s = self.settings
        device = self._params(item).get("device")
        parts = [
            f"cd {shlex.quote(str(item.config.rootpath))} &&", "pytest", shlex.quote(item.nodeid), f"--dl-profile={s.profile}", f"--dl-seed={s.seed}",
            f"--dl-framework={','.join(s.frameworks)}", f"--dl-replicas={s.replicas}",
        ]
        if device:
            parts.append(f"--dl-device={device}")
        return (
            " ".join(parts) + f"  # test seed {self.test_seed(item)}; hypothesis prints the falsifying "
            "example above and, in the ci/thorough profiles, a @reproduce_failure blob"
        )

    # ------------------------------------------------------------ results

    @property
    def is_controller(self) -> bool:
        return self.workerinput is None

    def summarize(self, terminalreporter: Any, header: bool = False) -> None:
        if not self.is_controller:
            return
        outcome = _outcome(self)
        if not outcome.doc["claims"] and not outcome.messages:
            return
        terminalreporter.write_sep("=", "dlconform conformance matrix")
        for line in self.header_lines() if header else ():  # activated by a claim test, after the header
            terminalreporter.write_line(line)
        for line in results.matrix_lines(outcome.doc, terminalreporter._tw.fullwidth):
            terminalreporter.write_line(line)
        for line in _reason_lines(outcome.doc):
            terminalreporter.write_line(line)
        for line in outcome.messages:
            terminalreporter.write_line(f"dlconform: {line}", bold=True)

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
            "allow_listen_all": s.allow_listen_all,  # --dl-allow-listen-all: TensorFlow cluster servers on all interfaces
            "divergences": s.divergences,  # the known-divergences file the verdicts were judged with
        }
        inventory = getattr(self, "_inventory", None)  # the controller's discovery (workers: their share)
        gpu = devices.gpu_details(inventory if inventory is not None else devices.discover())
        return results.environment(settings_dict, versions, self.inventory_text, gpu)

    def finish(self, session: pytest.Session) -> None:
        """Controller only: apply known divergences, compare with the baseline, write files.

        pytest calls this before the terminal summary, so :meth:`summarize` prints what
        was decided and written here. A regression against --dl-baseline fails the run;
        failures that are all known divergences do not.
        """
        if not self.is_controller:
            return
        outcome = _outcome(self)
        status = _exit_status(session, outcome)
        if status is not None:
            session.exitstatus = status
        outcome.doc = outcome.doc.replace(interrupted=_interrupted(session), exit_status=int(session.exitstatus))
        s = self.settings
        if s.report:
            results.write_atomic(s.report, outcome.doc.to_json())
            outcome.messages.append(f"JSON report written to {s.report}")
        if s.html:
            from . import html

            results.write_atomic(s.html, html.render(outcome.doc))
            outcome.messages.append(f"HTML matrix written to {s.html}")


def _validate_input_files(config: pytest.Config, settings: opts.Settings) -> None:
    """A baseline or known-divergences file that cannot be used stops the run before it starts."""
    from . import compare, divergences

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
    from . import divergences

    if not settings.divergences:
        return []
    try:
        return divergences.load(settings.divergences)
    except divergences.DivergenceError:
        return []  # the controller reports it (a usage error before any test runs)


def _numpy_state() -> Any:
    np = sys.modules.get("numpy")
    return np.random.get_state() if np is not None else None


def _restore_numpy_state(state: Any) -> None:
    if state is not None:
        sys.modules["numpy"].random.set_state(state)


def _dist_version(name: str) -> str:
    from importlib import metadata

    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return "not installed"


# ---------------------------------------------------------------- results of a run (controller)
# What Run.summarize/finish share: the report document of the run, with known divergences
# applied and the baseline compared, computed once per run.


@dataclass
class _Outcome:
    doc: Report  # replaced, never edited: each step derives the next report
    messages: list[str] = field(default_factory=list)
    regressed: list[str] = field(default_factory=list)
    unusable: bool = False  # a --dl-baseline or known-divergences file that cannot be used


def _outcome(run: Run) -> _Outcome:
    cached: _Outcome | None = getattr(run, "_dl_outcome", None)
    if cached is not None:
        return cached
    claims = {cid: c.as_dict() for cid, c in registry.registry().items()}
    outcome = _Outcome(results.report_document(run.collector, run.environment(), claims))
    _apply_divergences(run, outcome)
    from . import repro  # each violated test's standalone script (issue 14)
    outcome.doc = repro.attach(outcome.doc)
    _compare_baseline(run, outcome)
    run._dl_outcome = outcome  # type: ignore[attr-defined]  # computed once: finish, then summarize
    return outcome


def _apply_divergences(run: Run, outcome: _Outcome) -> None:
    from . import divergences

    path = run.settings.divergences
    if not path:
        return
    try:
        entries = divergences.load(path)
    except divergences.DivergenceError as exc:
        outcome.messages.append(f"{opts.flag(opts.DIVERGENCES)} (from {run.settings.describe(opts.DIVERGENCES)}): {exc}")
        outcome.unusable = True
        return
    outcome.doc = divergences.apply(outcome.doc, entries)
    outcome.messages += divergences.status_lines(list(outcome.doc.divergences))


def _compare_baseline(run: Run, outcome: _Outcome) -> None:
    from . import compare

    path = run.settings.baseline
    if not path or not outcome.doc["claims"]:
        return
    try:
        comparison = compare.compare(compare.load(path, "baseline"), outcome.doc)
    except compare.UnusableReport as exc:
        outcome.messages.append(f"{opts.flag(opts.BASELINE)}: {exc}")
        outcome.unusable = True
        return
    text = compare.to_text(comparison)
    outcome.regressed = compare.names([*comparison.regressed, *comparison.held_to_error])
    outcome.doc = outcome.doc.replace(baseline={"path": path, "regressed": outcome.regressed, "text": text})
    outcome.messages += text.rstrip("\n").splitlines()


def _exit_status(session: pytest.Session, outcome: _Outcome) -> int | None:
    """The run's exit status where results change it, else None."""
    if outcome.unusable:
        return int(pytest.ExitCode.USAGE_ERROR)
    if outcome.regressed:
        outcome.messages.append(f"failing the run: regressed against the baseline: {', '.join(outcome.regressed)}")
        return int(pytest.ExitCode.TESTS_FAILED)
    return None


def _reason_lines(doc: Report) -> list[str]:
    """Why tests were not applicable, and harness errors kept apart from conformance results."""
    lines = []
    for verdict, label in ((results.NOT_APPLICABLE, "n/a"), (results.ERROR, "harness error, not a conformance result")):
        reasons: dict[str, int] = {}
        for entry in doc["claims"].values():
            for test in entry["tests"]:
                if test["verdict"] == verdict:
                    key = test["reason"] or "(no reason given)"
                    reasons[key] = reasons.get(key, 0) + 1
        lines += [f"{label} ({n} test{'s' if n > 1 else ''}): {reason}" for reason, n in sorted(reasons.items())]
    return lines


def _interrupted(session: pytest.Session) -> str | None:
    """Why the run stopped early (Ctrl-C, -x, --maxfail), or None: a complete report of a
    partial run must say that it is partial."""
    if session.exitstatus == pytest.ExitCode.INTERRUPTED:
        return "interrupted"
    stop = session.shouldstop or session.shouldfail
    return str(stop) if stop else None
