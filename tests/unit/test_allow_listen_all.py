"""--dl-allow-listen-all / DLCONFORM_ALLOW_LISTEN_ALL / dl_allow_listen_all: a yes/no value,
off by default, with a one-line error naming the value and the fix."""

from __future__ import annotations

import pytest

from pytest_dlconform.run import settings as opts


def build(cli=None, env=None, ini=None) -> opts.Settings:
    return opts.build(opts.make_lookup(cli or {}, env or {}, ini or {}), installed=("tensorflow", "torch"))


def test_off_by_default():
    assert build().allow_listen_all is False
    assert opts.flag(opts.ALLOW_LISTEN_ALL) == "--dl-allow-listen-all"
    assert opts.env_var(opts.ALLOW_LISTEN_ALL) == "DLCONFORM_ALLOW_LISTEN_ALL"
    assert opts.ini_key(opts.ALLOW_LISTEN_ALL) == "dl_allow_listen_all"


@pytest.mark.parametrize(("value", "expected"), [("yes", True), ("True", True), ("1", True), ("on", True),
                                                  ("no", False), ("false", False), ("0", False), ("OFF", False)])
def test_yes_no_values_from_every_source(value, expected):
    assert build(cli={"allow-listen-all": value}).allow_listen_all is expected
    assert build(env={"DLCONFORM_ALLOW_LISTEN_ALL": value}).allow_listen_all is expected
    assert build(ini={"allow-listen-all": value}).allow_listen_all is expected


def test_command_line_beats_environment():
    s = build(cli={"allow-listen-all": "no"}, env={"DLCONFORM_ALLOW_LISTEN_ALL": "yes"})
    assert s.allow_listen_all is False and s.sources["allow-listen-all"] == "--dl-allow-listen-all"


def test_a_bad_value_is_one_line_naming_it_and_the_fix():
    with pytest.raises(opts.SettingsError) as err:
        build(env={"DLCONFORM_ALLOW_LISTEN_ALL": "maybe"})
    message = str(err.value)
    assert message == ("--dl-allow-listen-all='maybe' (from environment variable DLCONFORM_ALLOW_LISTEN_ALL): "
                       "not a yes/no value; pass yes or no (also true/false, 1/0, on/off)")
