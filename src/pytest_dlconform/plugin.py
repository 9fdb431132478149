"""pytest hooks, option registration and fixtures of pytest-dlconform. Thin on purpose:
the logic lives in plain modules; no framework is imported when this module loads."""

from __future__ import annotations

from typing import Any, Generator

import pytest

from . import session as dlsession
from . import results
from . import settings as opts
from .evidence import to_json
from .results import PROP_CLAIM, PROP_EVIDENCE, PROP_PARAMS, PROP_REPRO, PROP_VERDICT

KEY = pytest.StashKey["dlsession.Run"]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("dlconform", "deep-learning conformance (pytest-dlconform)")
    for name, text in opts.HELP.items():
        group.addoption(opts.flag(name), dest=f"dl_{name}", default=None, metavar=name.upper(),
                        help=f"{text} Env: {opts.env_var(name)}; ini: {opts.ini_key(name)}.")
        parser.addini(opts.ini_key(name), help=text, default=None)
    group.addoption("--dl-list-claims", action="store_true", default=False,
                    help="print the claims ledger (id, statement, source, frameworks) and exit without running.")


def pytest_configure(config: pytest.Config) -> None:
    for line in dlsession.MARKERS:
        config.addinivalue_line("markers", line)
    run = dlsession.Run.from_config(config)  # raises pytest.UsageError on a bad option
    config.stash[KEY] = run
    config.pluginmanager.register(run, "dlconform-run")  # its pytest_runtest_logreport collects verdicts
    if config.pluginmanager.hasplugin("xdist"):
        config.pluginmanager.register(XdistHooks(run), "dlconform-xdist")


class XdistHooks:
    """Registered only when pytest-xdist is present: the controller decides per worker."""

    def __init__(self, run: dlsession.Run) -> None:
        self.run = run

    def pytest_configure_node(self, node: Any) -> None:
        node.workerinput.update(self.run.worker_input(node))


def pytest_report_header(config: pytest.Config) -> list[str]:
    return config.stash[KEY].header_lines()


def pytest_cmdline_main(config: pytest.Config) -> int | None:
    if not config.getoption("dl_list_claims"):
        return None
    from .ledger import print_ledger

    try:
        settings = dlsession.settings_from_config(config)
    except pytest.UsageError as exc:
        config.get_terminal_writer().line(f"ERROR: {exc}", red=True)
        return int(pytest.ExitCode.USAGE_ERROR)
    return print_ledger(settings.claims)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    metafunc.config.stash[KEY].parametrize(metafunc)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    config.stash[KEY].select(config, items)


def pytest_collection_finish(session: pytest.Session) -> None:
    session.config.stash[KEY].configure_frameworks()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, Any, Any]:
    report = yield
    info = item.stash.get(dlsession.ITEM_KEY, None)
    if info is None:
        return report
    # Each phase's verdict is the worst so far, so the teardown report (the one JUnit XML
    # takes user properties from) carries the test's final verdict.
    verdict = results.worst([item.stash.get(dlsession.VERDICT_KEY, results.HOLDS), dlsession.phase_verdict(report, call)])
    item.stash[dlsession.VERDICT_KEY] = verdict
    props = [(PROP_CLAIM, info.claim), (PROP_PARAMS, info.params), (PROP_VERDICT, verdict)]
    recorder = item.stash.get(dlsession.EVIDENCE_KEY, None)
    if recorder is not None and report.when == "call":
        props.append((PROP_EVIDENCE, to_json(recorder)))
    if verdict in ("violated", "error"):
        repro = item.config.stash[KEY].repro(item)
        props.append((PROP_REPRO, repro))
        report.sections.append(("dlconform reproduction", repro))
    report.user_properties = [*item.user_properties, *props]
    return report


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    config.stash[KEY].summarize(terminalreporter)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    session.config.stash[KEY].finish(session)


# ---------------------------------------------------------------- fixtures


@pytest.fixture(scope="session")
def dl_settings(pytestconfig: pytest.Config) -> opts.Settings:
    """The validated --dl-* settings of this run."""
    return pytestconfig.stash[KEY].settings


@pytest.fixture(scope="session")
def dl_framework(request: pytest.FixtureRequest, dl_device: str) -> Any:
    """The framework adapter (TensorFlow or torch) this test instance runs on."""
    return request.config.stash[KEY].framework_fixture(request.param)


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
    return request.config.stash[KEY].strategy_fixture(request.param, dl_device)


@pytest.fixture(scope="session")
def tf(pytestconfig: pytest.Config, dl_device: str) -> Any:
    """The configured tensorflow module (logical devices and threads set before first use)."""
    return pytestconfig.stash[KEY].framework_fixture("tensorflow").module


@pytest.fixture(scope="session")
def torch(pytestconfig: pytest.Config, dl_device: str) -> Any:
    """The configured torch module (threads limited per xdist worker)."""
    return pytestconfig.stash[KEY].framework_fixture("torch").module


@pytest.fixture(scope="session")
def dl_tolerance() -> Any:
    """The tolerance policy: dl_tolerance(dtype, ops=, reduction=, device=, framework=, matmul=)."""
    from .checks.numerics import tolerance

    return tolerance


@pytest.fixture
def dl_seed(request: pytest.FixtureRequest) -> int:
    """This test's seed, derived from --dl-seed and the node id; printed on failure."""
    return request.config.stash[KEY].test_seed(request.node)


@pytest.fixture(autouse=True)
def _dl_guard(request: pytest.FixtureRequest) -> Generator[None, None, None]:
    """Seeds, evidence and global-state restoration around each claim test."""
    run = request.config.stash[KEY]
    with run.guard(request.node):
        yield
