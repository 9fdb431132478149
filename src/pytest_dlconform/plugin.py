"""pytest hooks, option registration and fixtures of pytest-dlconform. Thin on purpose: each
hook forwards to the role it belongs to (session.Controller: reports, matrix, files;
session.Worker: collection, fixtures, each test's guard and verdict); no framework is
imported when this module loads."""

from __future__ import annotations

import os
from collections.abc import Generator
from typing import TYPE_CHECKING, Any

import pytest

from .run import settings as opts
from .run import strategies  # the dl_strategies marker, its deselection, the GPU turn, the outer cluster
from .run.activation import MARKERS, Activation, is_claim_function
from .run.strategies import dl_groups, dl_timeout  # noqa: F401 - fixtures, registered by being in this module

if TYPE_CHECKING:  # the run's modules load when a run asks for dlconform, not with the plugin
    from .run.session import Process, Worker

ACTIVATION = pytest.StashKey[Activation]()


def _active(config: pytest.Config) -> Process | None:
    """This process's roles if something asked for dlconform, else None (the plugin is inert)."""
    act = config.stash.get(ACTIVATION, None)
    return act.process if act is not None else None


def _process(config: pytest.Config) -> Process:
    """This process's roles, built now if this is the first thing that needs them."""
    return config.stash[ACTIVATION].ensure()


def _worker(config: pytest.Config) -> Worker:
    """The role that runs tests, for a hook or fixture of a test."""
    return _process(config).worker


def _active_worker(config: pytest.Config) -> Worker | None:
    process = _active(config)
    return process.worker if process is not None else None


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("dlconform", "deep-learning conformance (pytest-dlconform)")
    for name, text in opts.HELP.items():
        shape: dict[str, Any] = {"nargs": "?", "const": "yes"} if name == opts.ALLOW_LISTEN_ALL else {}  # a bare flag is yes
        group.addoption(opts.flag(name), dest=f"dl_{name}", default=None, metavar=name.upper(),
                        action="append" if name in getattr(opts, "REPEATABLE", ()) else "store",
                        help=f"{text} Env: {opts.env_var(name)}; ini: {opts.ini_key(name)}.", **shape)
        parser.addini(opts.ini_key(name), help=text, default=None)
    group.addoption("--dl-list-claims", action="store_true", default=False,
                    help="print the claims ledger (id, statement, source, frameworks) and exit without running.")


def pytest_configure(config: pytest.Config) -> None:
    for line in MARKERS:
        config.addinivalue_line("markers", line)
    strategies.register_marker(config)
    act = config.stash[ACTIVATION] = Activation(config)
    if act.reason is not None and not config.getoption("dl_list_claims"):
        _process(config)  # asked for up front: a bad option is a usage error before collection
    if act.process is not None and act.process.settings.api_ledger:  # --dl-api-ledger: record calls (api_ledger.py)
        from .report.api_ledger import register

        register(config, act.process.settings.api_ledger, act.process.settings.frameworks)
    config.pluginmanager.register(ReportHook(config), "dlconform-reports")
    if config.pluginmanager.hasplugin("xdist"):
        config.pluginmanager.register(XdistHooks(act), "dlconform-xdist")


class XdistHooks:
    """Registered only when pytest-xdist is present: the controller decides per worker."""

    def __init__(self, act: Activation) -> None:
        self.act = act

    def pytest_configure_node(self, node: Any) -> None:
        process = self.act.process  # inert: workers that meet a claim test plan for themselves
        if process is not None and process.controller is not None:
            node.workerinput.update(process.controller.worker_input(node))


def pytest_report_header(config: pytest.Config) -> list[str]:
    process = _active(config)
    if process is None or process.controller is None:
        return []
    config.stash[ACTIVATION].header_printed = True
    return process.controller.header_lines()


def pytest_cmdline_main(config: pytest.Config) -> int | None:
    if getattr(config.option, "dl_profile", None) or opts.env_var(opts.PROFILE) in os.environ:
        from .run.profiles import choose_seed

        choose_seed(config)  # a randomized profile without --hypothesis-seed: pick one, printed and reported
    if not config.getoption("dl_list_claims"):
        return None
    from .report.ledger import print_ledger

    try:
        settings = opts.from_config(config)
    except pytest.UsageError as exc:
        config.get_terminal_writer().line(f"ERROR: {exc}", red=True)
        return int(pytest.ExitCode.USAGE_ERROR)
    return print_ledger(settings.claims)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    act = metafunc.config.stash[ACTIVATION]
    if act.process is None and not is_claim_function(metafunc.definition):
        return
    try:
        worker = _worker(metafunc.config)
    except pytest.UsageError as exc:  # raised again after collection, as a usage error
        act.pending = exc
        return
    worker.collection.parametrize(metafunc)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    act = config.stash[ACTIVATION]
    if act.pending is not None:
        raise act.pending
    if act.process is None and not any(item.get_closest_marker("claim") for item in items):
        return
    worker = _worker(config)
    strategies.deselect_uncovered(config, items)  # before select: deselected tests are no claim tests of the run
    worker.collection.select(config, items)
    worker.budget.apply(items)


def pytest_collection_finish(session: pytest.Session) -> None:
    worker = _active_worker(session.config)
    if worker is not None:
        worker.fixtures.configure_frameworks()
        strategies.prepare_outer_cluster(session.items, worker.logical_cpus, worker.settings.timeout)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Generator[None, Any, Any]:
    worker = _active_worker(item.config)
    if worker is None:
        return (yield)
    from .report import verdicts

    with verdicts.phase_warnings(item, worker):
        return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, Any, Any]:
    worker = _active_worker(item.config)
    if worker is None:
        return (yield)
    from .report import verdicts

    with verdicts.phase_warnings(item, worker), verdicts.bounded_shrinking(item, worker):
        return (yield)


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem: pytest.Function) -> None:
    """Inside every runtest_call wrapper (hypothesis's sets its node-id key there): key the
    claim test's hypothesis examples by its location-independent identity (Guard.pin_examples)."""
    worker = _active_worker(pyfuncitem.config)
    if worker is not None:
        worker.guard.pin_examples(pyfuncitem)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item) -> Generator[None, Any, Any]:
    worker = _active_worker(item.config)
    if worker is None:
        return (yield)
    from .report import verdicts

    with verdicts.phase_warnings(item, worker):
        return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, Any, Any]:
    worker = _active_worker(item.config)
    if worker is None:
        return (yield)
    from .report import verdicts

    with verdicts.phase_warnings(item, worker), verdicts.brief_repr_if_pinned(worker, item, call):
        report = yield  # (hypothesis's own makereport imports libcst on a failure: its warnings are counted)
    verdicts.annotate(worker, item, call, report)
    return report


def pytest_report_teststatus(report: Any, config: pytest.Config) -> tuple[str, str, str] | None:
    """A harness failure inside a test's call is a pytest error, not a failure."""
    if _active(config) is None:
        return None
    from .report import verdicts

    return verdicts.teststatus(report)


class ReportHook:
    """Hands claim tests' reports to the controller (on the xdist controller too, which
    collects nothing: its first claim report activates the run there)."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        process = _active(self.config)
        if process is None:
            from .report.results import is_claim_report

            if not is_claim_report(report):
                return
            try:
                process = _process(self.config)
            except pytest.UsageError:
                return  # the worker that ran the test reported the problem
        if process.controller is not None:  # an xdist worker's reports go to its controller
            process.controller.add(report)


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    process = _active(config)
    if process is not None and process.controller is not None:
        process.controller.summarize(terminalreporter, header=not config.stash[ACTIVATION].header_printed)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    process = _active(session.config)
    if process is not None and process.controller is not None:
        process.controller.finish(session)


# ---------------------------------------------------------------- fixtures


@pytest.fixture(scope="session")
def dl_settings(pytestconfig: pytest.Config) -> opts.Settings:
    """The validated --dl-* settings of this run."""
    return _process(pytestconfig).settings


@pytest.fixture(scope="session")
def dl_framework(request: pytest.FixtureRequest, dl_device: str) -> Any:
    """The framework adapter (TensorFlow or torch) this test instance runs on."""
    return _worker(request.config).fixtures.framework(request.param)


@pytest.fixture(scope="session")
def dl_device(request: pytest.FixtureRequest) -> str:
    """The device kind this test instance runs on: cpu, gpu or multi-gpu.

    Framework fixtures depend on it, so every framework test runs once per selected
    device kind; on a machine with GPUs the guard also makes it the default device of
    the test (tf.device scope, torch.set_default_device)."""
    return str(request.param)


@pytest.fixture(scope="session")
def dl_strategy(request: pytest.FixtureRequest, dl_device: str) -> Any:
    """A distribution-strategy handle (framework, name, replicas, device kind)."""
    return _worker(request.config).fixtures.strategy(request.param, dl_device)


@pytest.fixture(scope="session")
def dl_model(request: pytest.FixtureRequest, dl_device: str) -> Any:
    """A registered user model (--dl-model module:factory): see pytest_dlconform.run.usermodels."""
    return _worker(request.config).fixtures.model(request.param, dl_device)


@pytest.fixture(scope="session")
def tf(pytestconfig: pytest.Config, dl_device: str) -> Any:
    """The configured tensorflow module (logical devices and threads set before first use)."""
    return _worker(pytestconfig).fixtures.framework("tensorflow").module


@pytest.fixture(scope="session")
def torch(pytestconfig: pytest.Config, dl_device: str) -> Any:
    """The configured torch module (threads limited per xdist worker)."""
    return _worker(pytestconfig).fixtures.framework("torch").module


@pytest.fixture(scope="session")
def dl_tolerance() -> Any:
    """The tolerance policy: dl_tolerance(dtype, ops=, reduction=, device=, framework=, matmul=)."""
    from .checks.numerics import tolerance

    return tolerance


@pytest.fixture
def dl_seed(request: pytest.FixtureRequest) -> int:
    """This test's seed, from --dl-seed and the test's identity inside the package (not its
    install path: session.identity); printed on failure and stored in the report."""
    return _worker(request.config).guard.test_seed(request.node)


@pytest.fixture(autouse=True)
def _dl_guard(request: pytest.FixtureRequest) -> Generator[None, None, None]:
    """Seeds, evidence and global-state restoration around each claim test."""
    worker = _active_worker(request.config)
    if worker is None:  # inert: a host project's own test
        yield
        return
    with worker.guard.around(request.node), strategies.gpu_turn(request.node, worker.gpu_lock):
        yield
