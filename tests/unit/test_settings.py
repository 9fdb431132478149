"""settings.build: precedence, validation and one-line errors, without running pytest."""

from __future__ import annotations

import pytest

from pytest_dlconform.run import settings as opts

BOTH = ("tensorflow", "torch")


def build(cli=None, env=None, ini=None, installed=BOTH) -> opts.Settings:
    return opts.build(opts.make_lookup(cli or {}, env or {}, ini or {}), installed=installed)


def test_defaults_are_auto_device_installed_frameworks_ci_profile():
    s = build()
    assert (s.device, s.frameworks, s.profile, s.replicas, s.claims) == ("auto", BOTH, "ci", 2, ("*",))
    assert s.strategies == opts.ALL_STRATEGIES
    assert s.sources == {}


def test_precedence_is_cli_then_env_then_ini():
    ini = {"device": "gpu", "profile": "thorough", "replicas": "3"}
    env = {"DLCONFORM_DEVICE": "multi-gpu", "DLCONFORM_PROFILE": "quick"}
    s = build(cli={"device": "cpu"}, env=env, ini=ini)
    assert (s.device, s.profile, s.replicas) == ("cpu", "quick", 3)
    assert s.sources["device"] == "--dl-device"
    assert s.sources["profile"] == "environment variable DLCONFORM_PROFILE"
    assert s.sources["replicas"] == "ini key dl_replicas"


@pytest.mark.parametrize(
    ("where", "expected_source"),
    [("cli", "from --dl-device"), ("env", "from environment variable DLCONFORM_DEVICE"), ("ini", "from ini key dl_device")],
)
def test_bad_value_names_value_choices_and_source(where, expected_source):
    kwargs = {"cli": {}, "env": {}, "ini": {}}
    kwargs[where] = {"DLCONFORM_DEVICE": "tpu"} if where == "env" else {"device": "tpu"}
    with pytest.raises(opts.SettingsError) as err:
        build(**kwargs)
    message = str(err.value)
    assert "\n" not in message
    assert "'tpu'" in message and expected_source in message
    assert "cpu, gpu, multi-gpu, all, auto" in message


def test_framework_list_aliases_and_errors():
    assert build(cli={"framework": "tf, torch"}).frameworks == BOTH
    assert build(cli={"framework": "torch,pytorch"}).frameworks == ("torch",)
    with pytest.raises(opts.SettingsError, match=r"unknown framework 'jax'.*tensorflow, torch"):
        build(cli={"framework": "jax"})
    with pytest.raises(opts.SettingsError, match=r"tensorflow is not installed; install it with pip install"):
        build(cli={"framework": "tensorflow"}, installed=("torch",))
    with pytest.raises(opts.SettingsError, match="no framework is installed"):
        build(installed=())


def test_default_frameworks_are_the_installed_ones():
    assert build(installed=("torch",)).frameworks == ("torch",)


@pytest.mark.parametrize(
    ("name", "value", "fragment"),
    [
        ("replicas", "0", "must be at least 1"),
        ("replicas", "two", "not an integer"),
        ("seed", "-1", "must be at least 0"),
        ("strategy", "mirored", "unknown strategy 'mirored'"),
        ("profile", "fast", "use one of: quick, ci, thorough"),
        ("claims", " , ", "no claim glob given"),
        ("timeout", "0", "must be positive"),
        ("report", "/nonexistent-dir/r.json", "does not exist"),
        ("baseline", "/nonexistent/old.json", "no such file"),
    ],
)
def test_each_option_rejects_bad_values_in_one_line(name, value, fragment):
    with pytest.raises(opts.SettingsError) as err:
        build(cli={name: value})
    assert fragment in str(err.value) and f"--dl-{name}={value!r}" in str(err.value)
    assert "\n" not in str(err.value)


def test_strategies_and_claims_parse_lists():
    s = build(cli={"strategy": "mirrored,ddp", "claims": "autodiff.*, execution.function.*"})
    assert s.strategies == ("mirrored", "ddp")
    assert s.strategies_for("tensorflow") == ("mirrored",) and s.strategies_for("torch") == ("ddp",)
    assert s.claim_selected("autodiff.tape.watch") and s.claim_selected("execution.function.speed")
    assert not s.claim_selected("execution.eager.concrete-values")


def test_divergences_is_a_setting_with_the_usual_precedence_and_a_packaged_default_for_dlconform_run(tmp_path, monkeypatch):
    mine, theirs = tmp_path / "mine.toml", tmp_path / "theirs.toml"
    mine.write_text(""), theirs.write_text("")
    monkeypatch.delenv(opts.PACKAGED_DIVERGENCES_VAR, raising=False)
    assert build().divergences is None  # plain pytest: no file unless asked
    monkeypatch.setenv(opts.PACKAGED_DIVERGENCES_VAR, "1")  # what `dlconform run` sets
    s = build()
    assert s.divergences == opts.packaged_divergences() and s.describe(opts.DIVERGENCES) == "default"
    s = build(ini={"divergences": str(mine)})  # the ini key is honoured by dlconform run too
    assert s.divergences == str(mine) and "ini" in s.describe(opts.DIVERGENCES)
    assert build(cli={"divergences": str(theirs)}, ini={"divergences": str(mine)}).divergences == str(theirs)
    with pytest.raises(opts.SettingsError, match=(r"^--dl-divergences='.*nope.toml' \(from .*\): no such file; "
                                                  r"pass the path of a known-divergences TOML")):
        build(env={"DLCONFORM_DIVERGENCES": str(tmp_path / "nope.toml")})
