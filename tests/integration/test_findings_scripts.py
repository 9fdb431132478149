"""Each shipped known divergence's standalone script reproduces it in a fresh interpreter.

The scripts in pytest_dlconform/report/findings/ import only the framework and numpy; here each
runs as a maintainer would run it (``python SCRIPT``, a clean environment, a deadline; forked
from an interpreter that only imported the script's frameworks, script_zygote.py) and
must exit 1 with its BUG PRESENT line on this stack, the stack the entries are for. When a
framework release fixes one, its script exits 0, this test fails, and the entry (and the
script's test here) must be retired: the same discipline as an UNMATCHED entry. On another
stack (an entry's framework/version globs do not match) the test skips, saying which.
"""

from __future__ import annotations

import fnmatch
import os
import subprocess
import sys
from collections.abc import Iterator
from importlib import metadata, resources
from pathlib import Path

import pytest

from pytest_dlconform.core import devices
from pytest_dlconform.report import divergences

sys.path.insert(0, str(Path(__file__).resolve().parent))
import script_zygote  # this folder's helper

FINDINGS = resources.files("pytest_dlconform.report") / "findings"
ENTRIES = divergences.load(str(resources.files("pytest_dlconform.report") / "known_divergences.toml"))
# Findings with no known-divergences entry (no suite test is violated by them: the suites do
# not reach the case yet), with the versions they were observed on.
UNPINNED = {
    "keras_early_stopping_baseline.py": {"keras": "3.15.*"},
    "tf_function_reduce_retracing_varargs.py": {"tensorflow": "2.21.*"},
    "keras_spectral_normalization_inference.py": {"keras": "3.15.*"},
    # no ci example reaches the broadcast batch shape: found by the explore profile, not pinned
    "tf_bfloat16_batch_matmul_garbage.py": {"tensorflow": "2.21.*"},
}
# Findings that depend on the CPU: the flag on whose CPUs the script was seen to exit 0 (the
# framework's result right), and what is known of where it reproduced. On a CPU with the flag
# an exit 0 skips, with the script's line; anywhere else it fails as usual.
RIGHT_ON_CPUS_WITH = {
    "tf_bfloat16_batch_matmul_garbage.py": (
        "avx512_bf16", "reproduced on the project's machines up to 2026-12-01, whose CPU flags were not recorded"),
}
TIMEOUT_S = 420  # a loaded 2-core machine: TF import ~10 s, the multi-worker script starts two workers
_DIST = {"tensorflow": ("tensorflow", "tensorflow-cpu"), "torch": ("torch",), "keras": ("keras",)}


def _version(name: str) -> str:
    for dist in _DIST.get(name, (name,)):
        try:
            return metadata.version(dist)
        except metadata.PackageNotFoundError:
            continue
    return "not installed"


def _pins(entry: divergences.Divergence) -> list[tuple[str, str]]:
    return ([(entry.framework, entry.version)] if entry.framework and entry.version else []) + list(entry.versions)


def _other_stack(pins: list[tuple[str, str]]) -> str | None:
    for name, glob in pins:
        found = _version(name)
        if not fnmatch.fnmatchcase(found, glob):
            return f"{name} is {found}; the entry (and its script's expected outcome) is for {glob}"
    return None


def _clean_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG", "TMPDIR", "PYTHONPATH")}
    env.update(TF_CPP_MIN_LOG_LEVEL="2", CUDA_VISIBLE_DEVICES="")
    return env


@pytest.fixture(scope="module")
def zygotes() -> Iterator[dict[tuple[str, ...], script_zygote.Zygote]]:
    """This worker's zygotes, one per set of preloaded frameworks (script_zygote.py)."""
    made: dict[tuple[str, ...], script_zygote.Zygote] = {}
    yield made
    for z in made.values():
        z.close()


def _run(path: str, *, network: bool, zygotes: dict[tuple[str, ...], script_zygote.Zygote]
         ) -> subprocess.CompletedProcess[str]:
    env = _clean_env()
    if not network:
        # python SCRIPT, forked from an interpreter that has imported the script's frameworks
        # and run nothing else (script_zygote.py): the same exit code and output, without
        # TensorFlow's import once per script
        preload = script_zygote.preload_of(Path(path).read_text())
        if not preload:
            return subprocess.run([sys.executable, path], capture_output=True, text=True, timeout=TIMEOUT_S, env=env)
        if preload not in zygotes:
            zygotes[preload] = script_zygote.Zygote(preload, env)
        return zygotes[preload].run(path, TIMEOUT_S)
    # TensorFlow's servers listen on every interface: run the script (and its workers, which
    # inherit the namespace) in a private network namespace with only loopback.
    from pytest_dlconform.harness import netns

    try:
        net = netns.create()
    except netns.Unavailable as exc:
        pytest.skip(f"no private network namespace for the multi-worker script's servers: {exc}")
    code = (f"{netns.RANK_PRELUDE}import runpy, sys; sys.argv = [{path!r}]; "
            f"runpy.run_path({path!r}, run_name='__main__')")
    env[netns.NETNS_VAR] = net.child_env()
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    try:
        return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=TIMEOUT_S, env=env,
                              pass_fds=net.pass_fds())
    finally:
        net.close()


SCRIPTS = {str(e.script): _pins(e) for e in ENTRIES} | {k: sorted(v.items()) for k, v in UNPINNED.items()}


def test_every_entry_names_a_shipped_script_and_every_script_is_run_here():
    for entry in ENTRIES:
        assert entry.script, f"{entry.where} ({entry.claim}) names no standalone script (script = \"...\")"
        assert (FINDINGS / entry.script).is_file(), f"{entry.where}: {entry.script} is not in pytest_dlconform/report/findings/"
    shipped = {p.name for p in FINDINGS.iterdir() if p.name.endswith(".py") and p.name != "__init__.py"}
    assert shipped == set(SCRIPTS), f"scripts not run here: {shipped - set(SCRIPTS)}; missing: {set(SCRIPTS) - shipped}"


def test_the_scripts_import_only_the_framework_numpy_and_the_standard_library():
    allowed = {"numpy", "torch", "tensorflow", "keras"} | set(sys.stdlib_module_names)
    for name in SCRIPTS:
        names = script_zygote.imported((FINDINGS / name).read_text())
        assert names <= allowed, f"{name} imports {sorted(names - allowed)}"


@pytest.mark.parametrize("name", sorted(SCRIPTS))
def test_the_script_reproduces_the_divergence_in_a_fresh_interpreter(name, zygotes):
    elsewhere = _other_stack(SCRIPTS[name])
    if elsewhere:
        pytest.skip(elsewhere)
    proc = _run(str(FINDINGS / name), network="multiworker" in name, zygotes=zygotes)
    lines = [ln for ln in proc.stdout.splitlines() if ln.strip()]
    if name in RIGHT_ON_CPUS_WITH and proc.returncode == 0 and lines and lines[-1].startswith("FIXED: "):
        flag, where = RIGHT_ON_CPUS_WITH[name]
        if flag in devices.cpu_info()[1]:
            pytest.skip(f"this CPU has {flag}, and here the framework's result is right ({lines[-1]}); {where}")
    assert proc.returncode == 1 and lines and lines[-1].startswith("BUG PRESENT: "), (
        f"{name} exited {proc.returncode}, expected 1 (the divergence reproduces on this stack); "
        f"stdout: {proc.stdout[-800:]!r}; stderr: {proc.stderr[-800:]!r}")
