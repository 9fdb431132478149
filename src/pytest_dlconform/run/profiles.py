"""Hypothesis budgets for conformance runs (``--dl-profile``)."""

from __future__ import annotations

from hypothesis import HealthCheck, Phase, settings

PREFIX = "dlconform-"
_SLOW_OK = [HealthCheck.too_slow, HealthCheck.data_too_large]
THOROUGH_EXAMPLES = 200
QUICK_EXAMPLES = 2
#: The phases of the quick and ci profiles: hypothesis's own but its explain phase, which
#: re-runs a shrunk failing example many times over to comment which of its parts matter
#: (for a claim test that runs every sample of an op per example, seconds per failure; it
#: changes no verdict). thorough, explore and replay keep it.
PHASES = tuple(p for p in Phase if p is not Phase.explain)


def register() -> None:
    # quick: every pull request of a user's project (about four minutes with -n 2 on two
    # cores, README "Profiles"): every claim with at least one example (budget(n) scales to n/10, at least 1),
    # every op in eager, and a stratified sample of the compiled-backward, low-precision and
    # second-order suites (quick_op_sample); randomized, and still no example database so a shared checkout
    # never replays another person's failures silently. The ci profile checks everything.
    settings.register_profile(
        PREFIX + "quick", max_examples=QUICK_EXAMPLES, deadline=None, database=None, suppress_health_check=_SLOW_OK,
        phases=PHASES,
    )
    # ci: derandomized (the same examples every run, so two runs differ only by the stack
    # under test), no example database, failure blobs printed for reproduction.
    settings.register_profile(
        PREFIX + "ci", max_examples=20, deadline=None, database=None, derandomize=True,
        print_blob=True, suppress_health_check=_SLOW_OK, phases=PHASES,
    )
    # thorough: nightly and upgrade checks.
    settings.register_profile(
        PREFIX + "thorough", max_examples=THOROUGH_EXAMPLES, deadline=None, database=None, derandomize=True,
        print_blob=True, suppress_health_check=_SLOW_OK,
    )
    # explore: the thorough budget, randomized (the nightly soak, python -m pytest_dlconform.core.soak):
    # --hypothesis-seed picks the examples (derandomize would ignore it), so each run explores
    # new inputs and a flawed tolerance cannot hide behind one fixed draw.
    settings.register_profile(
        PREFIX + "explore", max_examples=THOROUGH_EXAMPLES, deadline=None, database=None, derandomize=False,
        print_blob=True, suppress_health_check=_SLOW_OK,
    )
    # replay: only what --dl-examples-db stored (hypothesis's reuse phase, then shrinking a
    # failure again), nothing generated: after a fix, the nightly's failures rerun in seconds.
    settings.register_profile(
        PREFIX + "replay", max_examples=THOROUGH_EXAMPLES, deadline=None, database=None, derandomize=False,
        print_blob=True, suppress_health_check=_SLOW_OK, phases=(Phase.explicit, Phase.reuse, Phase.shrink),
    )


def load(profile: str) -> None:
    settings.load_profile(PREFIX + profile)


#: Profiles whose examples come from hypothesis's random seed (the others are derandomized).
RANDOMIZED = ("quick", "explore")


def choose_seed(config: object) -> int | None:
    """Give a randomized run (--dl-profile=explore or quick, asked for on the command line or
    in DLCONFORM_PROFILE) a hypothesis seed when the user gave none, so the run's header
    prints it and its report stores it: the run can be repeated example for example. A
    worker keeps the controller's (xdist copies the options), a non-dlconform run is left alone."""
    import os
    import secrets
    import zlib

    from . import settings as opts

    def raw(name: str) -> str | None:  # the flag (pytest_addoption's dest), else the environment
        return getattr(option, f"dl_{name}", None) or os.environ.get(opts.env_var(name))

    option = getattr(config, "option", None)
    if option is None or hasattr(config, "workerinput") or getattr(option, "hypothesis_seed", None) is not None:
        return None
    # Under a fixed seed hypothesis neither reads nor writes the example database (its
    # run_engine drops the database key): with --dl-examples-db, the database is what
    # reproduces a failure (--dl-profile=replay), so no seed is chosen.
    if raw(opts.EXAMPLES_DB):
        return None
    if raw(opts.PROFILE) not in RANDOMIZED:
        return None
    # Every member of an outer cluster (torchrun ranks, TF_CONFIG workers: one pytest each)
    # must draw the same examples, so their collectives match: the seed comes from what they
    # share, --dl-seed, instead of from chance.
    from ..harness.clusters import OUTER_CLUSTER_VARS

    if any(var in os.environ for var in OUTER_CLUSTER_VARS):
        base = raw(opts.SEED) or "0"
        seed = zlib.crc32(f"dlconform-cluster:{base}".encode())
    else:
        seed = secrets.randbelow(2**32)
    option.hypothesis_seed = str(seed)
    return seed


# ------------------------------------------------------------------ the quick profile's sample

#: The compiled modes of the compiled-backward suite (suites/execution/test_compiled_backward.py),
#: as its test ids name them, in the order the quick profile's rotation offsets them.
COMPILED_SUITE_MODES = ("aot_eager", "torchscript", "inductor", "function", "xla")


def families() -> dict[str, tuple[str, ...]]:
    """The op families of the op table (each op's ``category``), each with its ops in table order."""
    from ..programs.ops import OPS

    out: dict[str, list[str]] = {}
    for name, spec in OPS.items():
        out.setdefault(spec.category, []).append(name)
    return {family: tuple(ops) for family, ops in out.items()}


#: The per-op suites the quick profile samples by op family, each with the modes its tests are
#: keyed by, in the order the rotation offsets them: the compiled-backward suite (its compiled
#: modes), the low-precision suite (its dtypes; both frameworks take the same ops) and the
#: second-order suite (framework and derivative mode). Every other per-op test (the op suite:
#: every op in eager, forward, reverse against finite differences, forward against reverse,
#: every layout; the edge cases) runs every op in the quick profile too.
QUICK_OP_SUITES: dict[str, tuple[str, ...]] = {
    "compiled": COMPILED_SUITE_MODES,
    "low-precision": ("float32", "float16", "bfloat16"),
    "second-order": ("torch/reverse-over-reverse", "torch/forward-over-reverse",
                     "tensorflow/reverse-over-reverse", "tensorflow/forward-over-reverse"),
}


def quick_op_sample(suite: str, seed: int) -> dict[str, tuple[str, ...]]:
    """The ops the quick profile checks in each mode of the per-op ``suite``
    (:data:`QUICK_OP_SUITES`), for ``--dl-seed`` ``seed``.

    Stratified, never random: in every mode one op of every op family, so every mode (with
    each of its dtypes, which every op's test checks) and every family is checked in every
    quick run. The op is a rotation by the seed: family ``f`` with ops ``f[0..n-1]`` gives
    mode ``m`` (its index among the suite's ``k`` modes) the op ``f[(seed + m * n // k) % n]``,
    so the modes of one run take different ops of a family, the next seed takes the next op
    in each, and ``n`` successive seeds check every op of the family in every mode. The ci
    profile checks every op."""
    modes = QUICK_OP_SUITES[suite]
    out: dict[str, tuple[str, ...]] = {}
    fams = families().values()
    for m, mode in enumerate(modes):
        picked = {ops[(seed + m * len(ops) // len(modes)) % len(ops)] for ops in fams}
        out[mode] = tuple(op for ops in fams for op in ops if op in picked)
    return out


def quick_compiled_sample(seed: int) -> dict[str, tuple[str, ...]]:
    """The ops the quick profile compiles in each compiled mode (:func:`quick_op_sample` of the
    compiled-backward suite); the ci profile compiles every op (:func:`compiled_ops`)."""
    return quick_op_sample("compiled", seed)


def compiled_ops(profile: str, seed: int, mode: str) -> tuple[str, ...]:
    """The ops whose compiled backward a run of ``profile`` checks in ``mode``: every op,
    except in the quick profile (:func:`quick_compiled_sample`)."""
    if profile == "quick":
        return quick_compiled_sample(seed)[mode]
    from ..programs.ops import OPS

    return tuple(OPS)


def of_run(config: object) -> tuple[str, int]:
    """The ``--dl-profile`` and ``--dl-seed`` of a pytest run (command line > environment >
    ini), for a suite that selects at collection; ("ci", 0) when the settings are unusable
    (the plugin stops the run with the usage error itself)."""
    import pytest

    from .settings import from_config

    try:
        settings = from_config(config)  # type: ignore[arg-type]
    except pytest.UsageError:
        return "ci", 0
    return settings.profile, settings.seed
