"""Options: ``--dl-*`` flags, ``DLCONFORM_*`` environment variables and ``dl_*`` ini keys.

Each value is read once, validated once and kept in one frozen :class:`Settings`.
Precedence is command line > environment > ini file > built-in default, and every
error names the value, the valid choices and where the value came from.
"""

from __future__ import annotations

import fnmatch
import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..core.versions import FRAMEWORK_DISTRIBUTIONS, framework_version  # noqa: F401 - names of this module too

if TYPE_CHECKING:
    import pytest

DEVICE = "device"
FRAMEWORK = "framework"
STRATEGY = "strategy"
REPLICAS = "replicas"
CLAIMS = "claims"
PROFILE = "profile"
SEED = "seed"
REPORT = "report"
HTML = "html"
BASELINE = "baseline"
TIMEOUT = "timeout"
ALLOW_LISTEN_ALL = "allow-listen-all"
MODEL = "model"
DIVERGENCES = "divergences"
EXAMPLES_DB = "examples-db"
SHARD = "shard"  # --dl-shard=I/N (shards.py)
API_LEDGER = "api-ledger"  # --dl-api-ledger=PATH (api_ledger.py)
KNOWN_REGRESSIONS = "known-regressions"  # --dl-known-regressions=fail|warn (with --dl-baseline)
KNOWN_REGRESSION_CHOICES = ("fail", "warn")
AUTOSAVE = "autosave"  # --dl-autosave=yes|no|DIR: each run's report also saved in DIR (the last AUTOSAVE_KEEP)
HOME = ".dlconform"  # the rootdir's folder of dlconform's own files (gitignore it)
SAVED_REPORTS = os.path.join(HOME, "reports")  # where reports are autosaved, under the rootdir
AUTOSAVE_KEEP = 20  # saved reports kept; older ones are pruned
LAST = "last"  # --dl-baseline=last: the newest saved report
# Set by `dlconform run` for the pytest it starts: there, the packaged known-divergences file
# is the built-in default of --dl-divergences (a flag, DLCONFORM_DIVERGENCES or a dl_divergences
# ini key still wins, in the usual order). A plain `pytest` run has no default file.
PACKAGED_DIVERGENCES_VAR = "DLCONFORM_PACKAGED_DIVERGENCES"

DEVICE_CHOICES = ("cpu", "gpu", "multi-gpu", "all", "auto")
FRAMEWORK_CHOICES = ("tensorflow", "torch")
FRAMEWORK_ALIASES = {"tf": "tensorflow", "pytorch": "torch"}
FRAMEWORK_INSTALL_HINT = {
    "tensorflow": "pip install 'pytest-dlconform[tensorflow]' (or tensorflow-cpu)",
    "torch": "pip install 'pytest-dlconform[torch]'",
}
STRATEGY_CHOICES = {
    "tensorflow": ("default", "one-device", "mirrored", "multi-worker", "parameter-server", "tpu"),
    "torch": ("single", "ddp", "fsdp"),
}
ALL_STRATEGIES = tuple(s for names in STRATEGY_CHOICES.values() for s in names)
PROFILE_CHOICES = ("quick", "ci", "thorough", "explore", "replay")
#: Profiles that keep no example database: their examples are fixed by derandomization.
DERANDOMIZED_PROFILES = ("ci", "thorough")


def flag(name: str) -> str:
    return f"--dl-{name}"


def ini_key(name: str) -> str:
    return f"dl_{name.replace('-', '_')}"


def env_var(name: str) -> str:
    return f"DLCONFORM_{name.replace('-', '_').upper()}"


HELP = {
    DEVICE: "device kind to run on: cpu, gpu, multi-gpu, all (every kind found), auto (gpu if found, else cpu). Default: auto.",
    FRAMEWORK: "comma list of frameworks: tensorflow, torch. Default: those installed.",
    STRATEGY: "comma list of distribution strategies for the dl_strategy fixture, or 'all'. "
    f"TensorFlow: {', '.join(STRATEGY_CHOICES['tensorflow'])}; torch: {', '.join(STRATEGY_CHOICES['torch'])}. Default: all.",
    REPLICAS: "replicas for multi-replica strategies (logical CPU devices for TensorFlow, processes for torch). Default: 2.",
    CLAIMS: "comma list of claim-id globs; only tests whose claim matches run (e.g. 'autodiff.*'). Default: all.",
    PROFILE: ("hypothesis budget: quick (development), ci (derandomized, no example database), thorough (nightly/upgrade), "
              "explore (the thorough budget, randomized by --hypothesis-seed: the soak), replay (only the examples stored in "
              "--dl-examples-db, nothing new). Default: ci."),
    SEED: "base seed for per-test framework seeds (integer). Default: 0.",
    REPORT: "write a versioned JSON report of claims, verdicts and evidence to this path.",
    HTML: "write a self-contained HTML conformance matrix to this path.",
    BASELINE: "compare this run with an earlier JSON report and fail on any regressed claim; 'last': the newest "
    "report saved by --dl-autosave before this run.",
    DIVERGENCES: "known-divergences TOML file ([[divergence]] claim, tests (node-id globs), the symptom (exception and "
    "message pattern, and/or max_error), versions, reason, expires): a violation that shows exactly that symptom is an "
    "xfail; expired, unmatched and not-selected entries are reported.",
    TIMEOUT: "deadline in seconds for each multi-process group or cluster. Default: 120.",
    ALLOW_LISTEN_ALL: "yes: where no private network namespace can be made, run local TensorFlow clusters on this "
    "host's network anyway, their gRPC servers listening on every interface (TensorFlow has no bind-address option); "
    "no: their claims report not applicable with the reason. Default: no.",
    EXAMPLES_DB: "hypothesis example database folder for the randomized profiles (explore, quick, replay): the failing "
    "examples a run finds are saved there and replayed first by every later run given the same folder (keep it as a "
    "CI artifact; --dl-profile=replay runs only those). Default: none.",
    MODEL: "your own model for the model.* claims: 'module:factory' (repeatable; env: comma list; ini: one per line). "
    "See docs/own-model.md.",
}
HELP[KNOWN_REGRESSIONS] = ("with --dl-baseline: a test that held in the baseline and is now violated with a known "
                           "divergence's symptom (a regression into a known bug) fails the run (fail) or is reported "
                           "only (warn). Default: fail.")
HELP[SHARD] = ("run shard I of N (I/N, from 1): the collection split into N parts balanced by the durations of "
               "earlier runs, tests that share work kept together; join the N reports with `dlconform merge`. "
               "Default: the whole collection.")
HELP[API_LEDGER] = ("record which public callables of the frameworks each claim test calls (sys.setprofile, "
                    "slower) and write the API ledger, covered / uncovered / out of scope per namespace, to this "
                    "JSON path (and the HTML table beside it); `dlconform coverage --api OLD.json NEW.json` "
                    "lists the new APIs no test calls.")
HELP[AUTOSAVE] = (f"also save the run's JSON report as NNNN_<UTC time>_<suite hash>.json, keeping the last "
                  f"{AUTOSAVE_KEEP} (`dlconform compare --last`, --dl-baseline=last): yes (in {SAVED_REPORTS} under "
                  "the rootdir), no, or a folder. Default: yes once dlconform is active and claim tests ran "
                  "(never in a --dl-shard run: a shard is part of a report).")
# Options given more than once on the command line (argparse action "append").
REPEATABLE = frozenset({MODEL})


class SettingsError(ValueError):
    """A bad option value; the message is one line, ready for pytest.UsageError."""


@dataclass(frozen=True)
class Settings:
    device: str = "auto"
    frameworks: tuple[str, ...] = ()
    strategies: tuple[str, ...] = ALL_STRATEGIES
    replicas: int = 2
    claims: tuple[str, ...] = ("*",)
    profile: str = "ci"
    seed: int = 0
    report: str | None = None
    html: str | None = None
    baseline: str | None = None
    timeout: float = 120.0
    allow_listen_all: bool = False  # TensorFlow cluster servers on this host's network (see harness/netns.py)
    models: tuple[str, ...] = ()  # --dl-model references 'module:factory', in order, without duplicates
    divergences: str | None = None  # the known-divergences TOML file (absolute), or None
    examples_db: str | None = None  # --dl-examples-db: hypothesis's example database folder (absolute), or None
    shard: tuple[int, int] | None = None  # --dl-shard: (I, N), 1 <= I <= N, or None (the whole collection)
    known_regressions: str = "fail"  # --dl-known-regressions: what a known regression against the baseline does
    api_ledger: str | None = None  # --dl-api-ledger: the API ledger JSON path (absolute), or None
    autosave: bool = True  # --dl-autosave: save each report in the saved-reports folder (run/session/outcome.py)
    autosave_dir: str | None = None  # that folder (absolute), or None: the rootdir's SAVED_REPORTS
    sources: Mapping[str, str] = field(default_factory=dict)

    def claim_selected(self, claim_id: str) -> bool:
        return any(fnmatch.fnmatchcase(claim_id, pattern) for pattern in self.claims)

    def strategies_for(self, framework: str) -> tuple[str, ...]:
        return tuple(s for s in self.strategies if s in STRATEGY_CHOICES[framework])

    def describe(self, name: str) -> str:
        return self.sources.get(name, "default")


def installed_frameworks() -> tuple[str, ...]:
    return tuple(fw for fw in FRAMEWORK_CHOICES if framework_version(fw) is not None)


# A raw value and a phrase saying where it came from ("--dl-device", "DLCONFORM_DEVICE", ...).
Raw = tuple[str, str]
Lookup = Callable[[str], "Raw | None"]


def make_lookup(cli: Mapping[str, object], env: Mapping[str, str], ini: Mapping[str, object]) -> Lookup:
    """Find one option's raw value by precedence CLI > env > ini."""

    def lookup(name: str) -> Raw | None:
        value = cli.get(name)
        if isinstance(value, (list, tuple)):  # a repeatable option (REPEATABLE)
            value = ",".join(str(v) for v in value) or None
        if value is not None:
            return str(value), flag(name)
        if env.get(env_var(name)) not in (None, ""):
            return env[env_var(name)], f"environment variable {env_var(name)}"
        value = ini.get(name)
        if value not in (None, "", []):
            return str(value), f"ini key {ini_key(name)}"
        return None

    return lookup


def _bad(name: str, raw: Raw, problem: str, fix: str) -> SettingsError:
    value, source = raw
    return SettingsError(f"{flag(name)}={value!r} (from {source}): {problem}; {fix}")


def _split(value: str) -> list[str]:
    return [part.strip() for part in value.split(",") if part.strip()]


def _choice(name: str, raw: Raw, choices: Sequence[str]) -> str:
    value = raw[0].strip().lower()
    if value not in choices:
        raise _bad(name, raw, "not a valid choice", f"use one of: {', '.join(choices)}")
    return value


def _frameworks(raw: Raw | None, installed: Sequence[str]) -> tuple[str, ...]:
    if raw is None:
        if not installed:
            raise SettingsError(
                "no framework is installed: install one with "
                + " or ".join(FRAMEWORK_INSTALL_HINT.values())
            )
        return tuple(installed)
    chosen: list[str] = []
    for part in _split(raw[0]) or [""]:
        name = FRAMEWORK_ALIASES.get(part.lower(), part.lower())
        if name not in FRAMEWORK_CHOICES:
            raise _bad(FRAMEWORK, raw, f"unknown framework {part!r}", f"use a comma list of: {', '.join(FRAMEWORK_CHOICES)}")
        if name not in installed:
            raise _bad(FRAMEWORK, raw, f"{name} is not installed",
                       f"install it with {FRAMEWORK_INSTALL_HINT[name]}, or leave it out")
        if name not in chosen:
            chosen.append(name)
    return tuple(chosen)


def _strategies(raw: Raw | None) -> tuple[str, ...]:
    if raw is None or raw[0].strip().lower() == "all":
        return ALL_STRATEGIES
    chosen: list[str] = []
    for part in _split(raw[0]) or [""]:
        if part.lower() not in ALL_STRATEGIES:
            raise _bad(STRATEGY, raw, f"unknown strategy {part!r}", f"use 'all' or a comma list of: {', '.join(ALL_STRATEGIES)}")
        chosen.append(part.lower())
    return tuple(dict.fromkeys(chosen))


def _positive_int(name: str, raw: Raw, minimum: int) -> int:
    try:
        value = int(raw[0])
    except ValueError:
        raise _bad(name, raw, "not an integer", f"pass an integer >= {minimum}") from None
    if value < minimum:
        raise _bad(name, raw, f"must be at least {minimum}", f"pass an integer >= {minimum}")
    return value


def _int_or(name: str, raw: Raw | None, minimum: int, default: int) -> int:
    return default if raw is None else _positive_int(name, raw, minimum)


def _positive_float(name: str, raw: Raw) -> float:
    try:
        value = float(raw[0])
    except ValueError:
        raise _bad(name, raw, "not a number", "pass a number of seconds > 0") from None
    if not value > 0:
        raise _bad(name, raw, "must be positive", "pass a number of seconds > 0")
    return value


BOOLEANS = {"yes": True, "true": True, "1": True, "on": True, "no": False, "false": False, "0": False, "off": False}


def _boolean(name: str, raw: Raw) -> bool:
    value = raw[0].strip().lower()
    if value not in BOOLEANS:
        raise _bad(name, raw, "not a yes/no value", "pass yes or no (also true/false, 1/0, on/off)")
    return BOOLEANS[value]


def _claims(raw: Raw | None) -> tuple[str, ...]:
    if raw is None:
        return ("*",)
    globs = _split(raw[0])
    if not globs:
        raise _bad(CLAIMS, raw, "no claim glob given", "pass e.g. 'autodiff.*' or 'autodiff.*,execution.function.*'")
    # A test names a registered claim id or is an error (there is no user claim file), so a
    # glob that matches no registered id selects nothing in any suite: a typo, said up front.
    from ..core import claims as registry

    unmatched = registry.unmatched(globs)
    if unmatched:
        raise _bad(CLAIMS, raw, f"{unmatched[0]!r} matches no registered claim id", registry.no_match_hint(unmatched[0]))
    return tuple(globs)


def _output_path(name: str, raw: Raw | None) -> str | None:
    if raw is None:
        return None
    path = os.path.abspath(raw[0])
    parent = os.path.dirname(path)
    if os.path.isdir(path):
        raise _bad(name, raw, "is a directory", "pass a file path, e.g. dlconform-report.json")
    if not os.path.isdir(parent):
        raise _bad(name, raw, f"directory {parent} does not exist", "create it first or choose another path")
    if not os.access(parent, os.W_OK):
        raise _bad(name, raw, f"directory {parent} is not writable", "choose a writable path")
    return path


def _input_path(name: str, raw: Raw | None, fix: str = "pass the path of an earlier --dl-report JSON file") -> str | None:
    if raw is None:
        return None
    path = os.path.abspath(raw[0])
    if not os.path.isfile(path):
        raise _bad(name, raw, "no such file", fix)
    return path


def packaged_divergences() -> str:
    """The known-divergences file shipped with the package (the shipped suites' findings)."""
    from importlib import resources

    return str(resources.files("pytest_dlconform.report") / "known_divergences.toml")


def _divergences(raw: Raw | None) -> str | None:
    if raw is None:
        return packaged_divergences() if os.environ.get(PACKAGED_DIVERGENCES_VAR) == "1" else None
    return _input_path(DIVERGENCES, raw, "pass the path of a known-divergences TOML file (see docs/findings.md)")


def _models(raw: Raw | None) -> tuple[str, ...]:
    """Syntax only: importing and calling the factories is :mod:`usermodels`' job (up front, in a
    fresh interpreter), so reading the options stays free of framework imports."""
    if raw is None:
        return ()
    refs: list[str] = []
    for part in (p.strip() for line in raw[0].splitlines() for p in line.split(",")):
        if not part:
            continue
        module, sep, attr = part.partition(":")
        dotted = all(x.isidentifier() for x in module.split(".")) and all(x.isidentifier() for x in attr.split("."))
        if not sep or not module or not attr or not dotted:
            raise _bad(MODEL, raw, f"{part!r} is not a 'module:factory' reference",
                       "pass e.g. --dl-model examples.gan:generator (an importable module, a colon, a callable in it)")
        if part not in refs:
            refs.append(part)
    if not refs:
        raise _bad(MODEL, raw, "no model reference given", "pass e.g. --dl-model examples.gan:generator")
    return tuple(refs)


def from_config(config: pytest.Config) -> Settings:
    """The settings of a pytest run (its ``--dl-*`` options, ``DLCONFORM_*`` variables and ``dl_*``
    ini keys); a bad value is a ``pytest.UsageError``."""
    import pytest

    cli = {name: config.getoption(f"dl_{name}") for name in HELP}
    ini = {name: config.getini(ini_key(name)) for name in HELP}
    try:
        return build(make_lookup(cli, os.environ, ini))
    except SettingsError as exc:
        raise pytest.UsageError(str(exc)) from None


def build(lookup: Lookup, installed: Sequence[str] | None = None) -> Settings:
    """Read and validate every option; raise SettingsError on the first bad one."""
    installed = installed_frameworks() if installed is None else tuple(installed)
    raws = {name: lookup(name) for name in HELP}
    sources = {name: raw[1] for name, raw in raws.items() if raw is not None}

    def get(name: str, convert: Callable[[Raw], object], default: object) -> object:
        raw = raws[name]
        return default if raw is None else convert(raw)

    return Settings(
        device=str(get(DEVICE, lambda r: _choice(DEVICE, r, DEVICE_CHOICES), "auto")),
        frameworks=_frameworks(raws[FRAMEWORK], installed),
        strategies=_strategies(raws[STRATEGY]),
        replicas=_int_or(REPLICAS, raws[REPLICAS], 1, 2),
        claims=_claims(raws[CLAIMS]),
        profile=str(get(PROFILE, lambda r: _choice(PROFILE, r, PROFILE_CHOICES), "ci")),
        seed=_int_or(SEED, raws[SEED], 0, 0),
        report=_output_path(REPORT, raws[REPORT]),
        html=_output_path(HTML, raws[HTML]),
        baseline=_baseline(raws[BASELINE], raws[AUTOSAVE]),
        timeout=float(get(TIMEOUT, lambda r: _positive_float(TIMEOUT, r), 120.0)),  # type: ignore[arg-type]
        allow_listen_all=bool(get(ALLOW_LISTEN_ALL, lambda r: _boolean(ALLOW_LISTEN_ALL, r), False)),
        models=_models(raws[MODEL]),
        divergences=_divergences(raws[DIVERGENCES]),
        examples_db=_examples_db(raws[EXAMPLES_DB], raws[PROFILE]),
        shard=_shard(raws[SHARD]),
        api_ledger=_output_path(API_LEDGER, raws[API_LEDGER]),
        known_regressions=str(get(KNOWN_REGRESSIONS, lambda r: _choice(KNOWN_REGRESSIONS, r, KNOWN_REGRESSION_CHOICES),
                                  "fail")),
        autosave=_autosave(raws[AUTOSAVE]) is not False,
        autosave_dir=_autosave_dir(raws[AUTOSAVE]),
        sources=sources,
    )


def _examples_db(raw: Raw | None, profile_raw: Raw | None) -> str | None:
    profile = profile_raw[0] if profile_raw is not None else "ci"
    if raw is None:
        if profile == "replay":
            raise _bad(PROFILE, profile_raw or ("replay", "default"), "replays the stored examples and has none to replay",
                       f"pass {flag(EXAMPLES_DB)}=DIR, the folder an explore run saved its failures in")
        return None
    path = os.path.abspath(raw[0])
    if profile in DERANDOMIZED_PROFILES:
        raise _bad(EXAMPLES_DB, raw, f"the {profile} profile is derandomized and keeps no example database",
                   f"use {flag(PROFILE)}=explore (or quick, or replay) with an example database")
    if os.path.exists(path) and not os.path.isdir(path):
        raise _bad(EXAMPLES_DB, raw, "is a file, not a folder", "pass a folder (it is created if missing)")
    parent = os.path.dirname(path)
    if not os.path.isdir(parent):
        raise _bad(EXAMPLES_DB, raw, f"directory {parent} does not exist", "create it first or choose another path")
    if not os.access(path if os.path.isdir(path) else parent, os.W_OK):
        raise _bad(EXAMPLES_DB, raw, "is not writable", "choose a writable folder")
    return path


def parse_shard(value: str) -> tuple[int, int]:
    """``'I/N'`` as (I, N), 1 <= I <= N; ValueError with the problem and the fix otherwise."""
    match = re.match(r"^\s*(\d+)\s*/\s*(\d+)\s*$", value)
    if not match:
        raise ValueError("not a shard I/N; pass e.g. 1/4 (shard 1 of 4; shards count from 1)")
    index, count = int(match.group(1)), int(match.group(2))
    if count < 1:
        raise ValueError("the number of shards must be at least 1; pass e.g. 1/4")
    if not 1 <= index <= count:
        raise ValueError(f"shard {index} of {count} does not exist; pass I/{count} with 1 <= I <= {count}")
    return index, count


def _shard(raw: Raw | None) -> tuple[int, int] | None:
    if raw is None:
        return None
    try:
        return parse_shard(raw[0])
    except ValueError as exc:
        problem, _, fix = str(exc).partition("; ")
        raise _bad(SHARD, raw, problem, fix) from None


# ---------------------------------------------------------------- saved reports (--dl-autosave)

SAVED_NAME = re.compile(r"^(\d{4,})_(\d{8}T\d{6}Z)_([0-9A-Za-z]+)\.json$")


def _autosave(raw: Raw | None) -> str | bool:
    """True (the default folder), False (off) or the folder given (absolute)."""
    if raw is None:
        return True
    word = raw[0].strip().lower()
    if word in BOOLEANS:
        return BOOLEANS[word]
    path = os.path.abspath(raw[0])
    if os.path.exists(path) and not os.path.isdir(path):
        raise _bad(AUTOSAVE, raw, "is a file, not a folder", "pass yes, no or a folder (it is created if missing)")
    parent = os.path.dirname(path)
    if not os.path.isdir(parent):
        raise _bad(AUTOSAVE, raw, f"directory {parent} does not exist", "create it first or choose another folder")
    return path


def _autosave_dir(raw: Raw | None) -> str | None:
    chosen = _autosave(raw)
    return chosen if isinstance(chosen, str) else None


def saved_dir(env: Mapping[str, str] | None = None, start: str | None = None) -> str:
    """Where to look for saved reports without a rootdir (``dlconform compare --last``,
    ``--dl-baseline=last``): DLCONFORM_AUTOSAVE when it names a folder, else the nearest
    :data:`SAVED_REPORTS` in the current folder or above it, else the current folder's."""
    env = os.environ if env is None else env
    value = env.get(env_var(AUTOSAVE), "").strip()
    if value and value.lower() not in BOOLEANS:
        return os.path.abspath(value)
    here = os.path.abspath(start or os.getcwd())
    folder = here
    while True:
        if os.path.isdir(os.path.join(folder, SAVED_REPORTS)):
            return os.path.join(folder, SAVED_REPORTS)
        parent = os.path.dirname(folder)
        if parent == folder:
            return os.path.join(here, SAVED_REPORTS)
        folder = parent


def saved_reports(folder: str) -> list[str]:
    """The saved reports in ``folder`` (paths), oldest first by their number; [] if none."""
    try:
        names = os.listdir(folder)
    except OSError:
        return []
    found = [(int(m.group(1)), name) for name in names if (m := SAVED_NAME.match(name))]
    return [os.path.join(folder, name) for _, name in sorted(found)]


def _baseline(raw: Raw | None, autosave_raw: Raw | None) -> str | None:
    if raw is None or raw[0].strip().lower() != LAST:
        return _input_path(BASELINE, raw)
    chosen = _autosave(autosave_raw) if autosave_raw is not None else True
    folder = chosen if isinstance(chosen, str) else saved_dir(env={})  # the option's raw value saw the env
    saved = saved_reports(folder)
    if not saved:
        raise _bad(BASELINE, raw, f"no saved report in {folder}",
                   f"run once with {flag(AUTOSAVE)} on (the default) first, or pass the path of an earlier "
                   "--dl-report JSON file")
    return saved[-1]
