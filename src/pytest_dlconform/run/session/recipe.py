"""The reproduce lines a run prints: the header's (the whole run) and each failed test's.

Each is a shell line that runs verbatim from any directory (issue 31):

- a shipped suite test is named by its module in the package, ``pytest --pyargs
  'pytest_dlconform.suites.data.test_torch_loader::test_x[cpu-generator]'`` (pytest resolves
  ``--pyargs MODULE::TEST[ID]``), so it needs neither the run's folder nor the install path;
- a test of the user's own (a project's claim tests) is named by its path from the folder
  pytest ran in, after ``cd`` to that folder, as is a shipped model test: a ``--dl-model``
  module imports from the current directory (:func:`pytest_dlconform.run.usermodels.resolve`);
- the header reruns the run's selection: ``dlconform run ...`` when the run was one, else
  ``pytest`` with the run's arguments, the shipped ones as ``--pyargs`` names.

Both pass the settings that change what a test draws or checks (profile, seeds, frameworks,
replicas, device, strategies, models, a known-divergences file of the user's (not the
packaged one, ``dlconform run``'s default: a violated test is one no entry explained), the
timeout and network choice when given, hypothesis's seed or example database); a test's own
line passes its own device, strategy and model. Pure functions: the caller finds the
folders (:mod:`.guard`, :mod:`.workers`).
"""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path, PurePath

from .. import settings as opts
from . import identity

_DOTTED = re.compile(r"^[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*$")


def flags(s: opts.Settings, hypothesis_seed: object = None, params: Mapping[str, str] | None = None,
          packaged_default: bool = True) -> list[str]:
    """The run's settings as options; ``params`` (a test's) narrow device, strategy and model to its own.
    ``packaged_default``: the packaged known divergences go without saying (``dlconform run``'s
    default; a violated test is one that no entry explained, so its line needs none)."""
    p = params or {}
    out = [f"--dl-profile={s.profile}", f"--dl-seed={s.seed}", f"--dl-framework={','.join(s.frameworks)}",
           f"--dl-replicas={s.replicas}", f"--dl-device={p.get('device') or s.device}"]
    if p.get("strategy"):
        out.append(f"--dl-strategy={p['strategy']}")
    elif s.strategies != opts.ALL_STRATEGIES:
        out.append(f"--dl-strategy={','.join(s.strategies)}")
    models = [p["model"]] if p.get("model") else list(s.models) if params is None else []
    out += [f"--dl-model={shlex.quote(ref)}" for ref in models]
    if s.divergences and s.describe(opts.DIVERGENCES) != "default" and not (packaged_default and _packaged(s.divergences)):
        out.append(f"--dl-divergences={shlex.quote(s.divergences)}")
    if opts.TIMEOUT in s.sources:
        out.append(f"--dl-timeout={s.timeout:g}")
    if s.allow_listen_all:
        out.append("--dl-allow-listen-all=yes")
    if hypothesis_seed is not None:  # a randomized profile's examples (profiles.choose_seed)
        out.append(f"--hypothesis-seed={shlex.quote(str(hypothesis_seed))}")
    if s.examples_db:
        out.append(f"--dl-examples-db={shlex.quote(s.examples_db)}")
    return out


def test_line(nodeid: str, path: PurePath | None, here: PurePath, suites_dirs: Iterable[PurePath],
              s: opts.Settings, params: Mapping[str, str], hypothesis_seed: object = None) -> str:
    """The command that reruns exactly this test (``path``: its file, resolved; ``here``: where pytest ran)."""
    rest = nodeid.partition("::")[2]
    shipped = identity.package_name(path, suites_dirs) if path is not None else None
    if shipped is not None:
        target = ["--pyargs", shlex.quote(shipped + ("::" + rest if rest else ""))]
        cd = bool(params.get("model"))
    else:
        file = _from(path, here) if path is not None else nodeid.partition("::")[0]
        target = [shlex.quote(file + ("::" + rest if rest else ""))]
        cd = True
    prefix = [f"cd {shlex.quote(str(here))} &&"] if cd else []
    return " ".join([*prefix, "pytest", *target, *flags(s, hypothesis_seed, params)])


def run_line(args: Sequence[str], *, pyargs: bool, here: Path, suites_dirs: Iterable[PurePath], s: opts.Settings,
             dlconform_run: bool, hypothesis_seed: object = None, keyword: str = "", markexpr: str = "") -> str:
    """The command that reruns the run's selection (``args``: pytest's ``config.args``)."""
    dirs = tuple(suites_dirs)
    names: list[str] = []  # --pyargs names
    paths: list[str] = []  # the user's files, from ``here``
    rest = list(args)
    if dlconform_run and rest[:1] == [identity.SUITES_PACKAGE]:
        rest = rest[1:]
    for arg in rest:
        base, bracket, tail = arg.partition("[")
        file, sep, inner = base.partition("::")
        where = Path(os.path.realpath(here / file))
        shipped = identity.package_name(where, dirs) if where.exists() else None
        if shipped is not None:
            names.append(shipped + sep + inner + bracket + tail)
        elif pyargs and not where.exists() and _DOTTED.match(file):
            names.append(arg)
        else:
            paths.append(_from(where, here) + sep + inner + bracket + tail)
    paths = [p for p in paths if p != "."]  # the folder pytest ran in: what it collects from there anyway
    cd = bool(paths) or (not names and not dlconform_run) or bool(s.models)
    if dlconform_run:
        head = ["dlconform", "run"]  # = pytest --pyargs pytest_dlconform.suites, the packaged divergences
    else:
        head = ["pytest", *(["--pyargs"] if names else [])]
    selection = [f"--dl-claims={shlex.quote(','.join(s.claims))}"] if s.claims != ("*",) else []
    if keyword:
        selection.append(f"-k {shlex.quote(keyword)}")
    if markexpr:
        selection.append(f"-m {shlex.quote(markexpr)}")
    prefix = [f"cd {shlex.quote(str(here))} &&"] if cd else []
    return " ".join([*prefix, *head, *map(shlex.quote, names + paths), *flags(s, hypothesis_seed, packaged_default=dlconform_run),
                     *selection])


def _packaged(path: str) -> bool:
    """The known divergences shipped with the package (``dlconform run``'s default): left out."""
    return os.path.realpath(path) == os.path.realpath(opts.packaged_divergences())


def _from(path: PurePath, here: PurePath) -> str:
    """``path`` relative to ``here`` (posix), or absolute when it is not below it."""
    try:
        return Path(path).relative_to(here).as_posix() or "."
    except ValueError:
        return str(path)
