"""Saved reports (--dl-autosave, ``dlconform compare --last``, --dl-baseline=last) and the
quiet compare output (known-divergence entries counted unless -v): synthetic reports."""

from __future__ import annotations

import datetime
import json
import os
from pathlib import Path

import pytest
from test_compare import BASE, NESTED, XLA, changed, doc, save  # tests/unit is on sys.path (rootdir-relative import)

from pytest_dlconform import cli
from pytest_dlconform.report import compare, results
from pytest_dlconform.report.document import Report
from pytest_dlconform.run import settings as opts
from pytest_dlconform.run.session.outcome import autosave

NOW = datetime.datetime(2024, 6, 11, 12, 3, 1, tzinfo=datetime.timezone.utc)


def report(rows: list = BASE, suite: str | None = "sha256:0123456789abcdef") -> Report:  # type: ignore[type-arg]
    document = doc(rows)
    if suite:
        document["environment"]["suite_hash"] = suite
    return Report.from_dict(document)


def test_autosave_numbers_names_and_prunes(tmp_path: Path) -> None:
    folder = tmp_path / ".dlconform" / "reports"
    first = autosave(str(folder), report(), now=NOW)
    assert os.path.basename(first) == "0001_20240611T120301Z_0123456789.json"
    assert json.loads(Path(first).read_text())["schema"] == results.SCHEMA
    paths = [autosave(str(folder), report(suite=None), keep=3, now=NOW) for _ in range(4)]
    assert [os.path.basename(p) for p in paths][-1] == "0005_20240611T120301Z_nohash.json"
    kept = sorted(p.name for p in folder.iterdir())
    assert kept == [f"000{n}_20240611T120301Z_nohash.json" for n in (3, 4, 5)]  # the newest 3; no temporary left
    assert opts.saved_reports(str(folder)) == [str(folder / name) for name in kept]
    (folder / "notes.json").write_text("{}")  # not a saved report: never listed, never pruned
    autosave(str(folder), report(), keep=3, now=NOW)
    assert (folder / "notes.json").exists() and len(opts.saved_reports(str(folder))) == 3


def test_the_saved_folder_is_found_from_below_the_rootdir(tmp_path: Path) -> None:
    (tmp_path / ".dlconform" / "reports").mkdir(parents=True)
    below = tmp_path / "a" / "b"
    below.mkdir(parents=True)
    assert opts.saved_dir(env={}, start=str(below)) == str(tmp_path / ".dlconform" / "reports")
    assert opts.saved_dir(env={"DLCONFORM_AUTOSAVE": str(tmp_path / "x")}, start=str(below)) == str(tmp_path / "x")


def _saved(tmp_path: Path, *documents: Report) -> Path:
    folder = tmp_path / ".dlconform" / "reports"
    for document in documents:
        autosave(str(folder), document, now=NOW)
    return folder


def test_compare_last_compares_the_two_newest_saved(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("DLCONFORM_AUTOSAVE", raising=False)
    _saved(tmp_path, report(changed(BASE, autodiff_tape_nested=results.VIOLATED)), report(),
           report(changed(BASE, autodiff_tape_nested=results.VIOLATED)))
    assert cli.main(["compare", "--last"]) == compare.EXIT_REGRESSED  # 0002 (held) -> 0003 (violated)
    captured = capsys.readouterr()
    assert captured.out.startswith("dlconform compare: REGRESSED: 1 cell(s) of 1 claim(s): autodiff.tape.nested")
    assert "0002_" in captured.err and "0003_" in captured.err


@pytest.mark.parametrize("count", [0, 1])
def test_compare_last_with_fewer_than_two_saved_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                            monkeypatch: pytest.MonkeyPatch, count: int) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("DLCONFORM_AUTOSAVE", raising=False)
    _saved(tmp_path, *[report()] * count)
    assert cli.main(["compare", "--last"]) == compare.EXIT_UNUSABLE
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and "--last needs two saved reports" in err
    assert ("has none" if count == 0 else "has only one") in err and "dlconform compare OLD.json NEW.json" in err


def test_compare_last_with_paths_or_no_reports_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["compare", "--last", "a.json"]) == compare.EXIT_UNUSABLE
    assert cli.main(["compare", "a.json"]) == compare.EXIT_UNUSABLE
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 2 and "give no report path" in err[0] and "--last for the two newest" in err[1]


def _build(**values: str) -> opts.Settings:
    return opts.build(opts.make_lookup(values, {}, {}), installed=("tensorflow",))


def test_baseline_last_is_the_newest_saved_report(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(opts.SettingsError) as err:
        _build(baseline="last")
    message = str(err.value)
    assert "\n" not in message and message.startswith("--dl-baseline='last' (from --dl-baseline): no saved report in ")
    assert "--dl-autosave on (the default)" in message
    folder = _saved(tmp_path, report(), report())
    assert _build(baseline="last").baseline == opts.saved_reports(str(folder))[-1]
    other = tmp_path / "elsewhere"
    with pytest.raises(opts.SettingsError, match=r"no saved report in .*elsewhere"):
        _build(baseline="last", autosave=str(other))


def test_the_autosave_option(tmp_path: Path) -> None:
    assert (_build().autosave, _build().autosave_dir) == (True, None)
    assert _build(autosave="no").autosave is False
    assert _build(autosave=str(tmp_path / "saved")).autosave_dir == str(tmp_path / "saved")
    (tmp_path / "file").write_text("")
    with pytest.raises(opts.SettingsError, match="is a file, not a folder"):
        _build(autosave=str(tmp_path / "file"))
    with pytest.raises(opts.SettingsError, match="does not exist"):
        _build(autosave=str(tmp_path / "missing" / "saved"))


# ------------------------------------------------------------------ quiet compare


def _quiet_known(tmp_path: Path) -> str:
    known = tmp_path / "known.toml"
    entries = [
        ('autodiff.tape.nest*', '["autodiff/test_a.py::test_nested[*]"]',
         'framework = "torch"\nversion = "2.*"\n'),  # another stack
        ('data.*', '["data/test_x.py::*"]', 'versions = { numpy = "2.*" }\n'),  # not selected
        ('execution.*', '["data/test_y.py::*"]', 'versions = { numpy = "2.*" }\n'),  # not selected
    ]
    known.write_text("".join(
        f'[[divergence]]\nclaim = "{claim}"\ntests = {tests}\nexception = "ValueError"\nmessage = "m"\n{extra}'
        'reason = "r"\nexpires = 2999-12-31\n\n' for claim, tests, extra in entries))
    return str(known)


def test_compare_counts_the_divergences_that_need_no_action_unless_verbose(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    old = save(tmp_path, "old.json", doc(BASE))
    new = save(tmp_path, "new.json", doc(changed(BASE, autodiff_tape_nested=results.VIOLATED), evidences={NESTED: XLA}))
    known = _quiet_known(tmp_path)
    assert cli.main(["compare", "--known-divergences", known, old, new]) == compare.EXIT_REGRESSED
    quiet = capsys.readouterr().out.splitlines()
    summary = [i for i, line in enumerate(quiet) if "known divergence" in line]
    assert len(summary) == 1, quiet
    assert quiet[summary[0]].startswith("known divergences: ") and "-v lists each entry" in quiet[summary[0]]
    assert "2 not selected" in quiet[summary[0]] and "1 for another stack" in quiet[summary[0]]
    regressed = quiet.index("Regressed (held, now violated): 1")
    assert regressed < summary[0]  # the regression first
    assert cli.main(["compare", "-v", "--known-divergences", known, old, new]) == compare.EXIT_REGRESSED
    verbose = capsys.readouterr().out.splitlines()
    each = [i for i, line in enumerate(verbose) if "known divergence" in line]
    assert len(each) == 3 and verbose.index("Regressed (held, now violated): 1") < each[0]
    assert sum("known divergence not selected: " in line for line in verbose) == 2
    assert cli.main(["compare", "--format", "markdown", "--known-divergences", known, old, new]) == 1
    md = capsys.readouterr().out
    assert md.count("known divergence") == 1 and md.index("#### Regressed") < md.index("known divergences: ")
    assert cli.main(["compare", "--format", "json", "--known-divergences", known, old, new]) == 1
    assert len(json.loads(capsys.readouterr().out)["divergences"]) == 3  # data: every entry
