"""The modes ledger: claims declare documented modes, tests record what they checked, and a
report that leaves a declared mode unchecked fails ``dlconform modes --check``."""

from __future__ import annotations

import pytest

from pytest_dlconform.core import claims, evidence
from pytest_dlconform.frameworks import HarnessError
from pytest_dlconform.report import modes


def _report(declared, tests):
    return {"claims": {"modules.x": {"claim": {"id": "modules.x", "modes": declared}, "tests": tests}}}


def _test(verdict, covered):
    return {"verdict": verdict, "evidence": {"checks": {}, "notes": {}, "modes": covered}}


def test_registry_parses_modes_and_refuses_bad_ones():
    entry = {"id": "modules.a", "statement": "s", "source": "x", "frameworks": ["torch"], "modes": ["train", "eval"]}
    assert claims._parse("modules", entry).modes == ("train", "eval")
    with pytest.raises(claims.RegistryError, match="modes listed twice: \\['train'\\]"):
        claims._parse("modules", {**entry, "modes": ["train", "train"]})
    with pytest.raises(claims.RegistryError, match="modes must be a list of names without spaces"):
        claims._parse("modules", {**entry, "modes": ["train mode"]})
    with pytest.raises(claims.RegistryError, match="modes must be a list"):
        claims._parse("modules", {**entry, "modes": "train"})


def test_covers_records_declared_modes_and_refuses_others():
    with evidence.recording(("train", "eval")) as rec:
        evidence.covers("train")
        evidence.covers("train", "eval")
        with pytest.raises(HarnessError, match=r"evidence.covers\('frozen'\): not a mode of this test's claim; "
                                               r"its modes are \['eval', 'train'\]"):
            evidence.covers("frozen")
    assert rec.as_dict()["modes"] == {"eval": 1, "train": 2}
    evidence.covers("anything")  # outside a recorder: a no-op, as for check and note


def test_ledger_counts_tests_per_mode_and_lists_unchecked():
    doc = _report(["train", "eval", "frozen"], [_test("holds", {"train": 3}), _test("violated", {"train": 1, "eval": 2}),
                                               _test("not_applicable", {"frozen": 1})])
    led = modes.ledger(doc)
    entry = led["claims"]["modules.x"]
    assert entry["covered"] == {"train": {"holds": 1, "violated": 1, "checks": 4}, "eval": {"violated": 1, "checks": 2}}
    assert entry["unchecked"] == ["frozen"]  # a not-applicable test checked nothing
    assert (led["declared"], led["unchecked"]) == (3, 1)
    assert modes.problems(led) == ["modules.x: frozen"]


def test_a_test_matched_to_a_known_divergence_counts_the_modes_it_checked_before_its_pinned_failure():
    """covers is called once a check holds: a test whose last case fails with the pinned symptom
    (float64 over 3 replicas) checked the modes it recorded before; one that recorded none
    checked none, and a claim whose only tests are such is left out."""
    pinned = {**_test("violated", {"replicas=2": 2, "dtype=float64": 1}), "divergence": "entry 23 (x)"}
    led = modes.ledger(_report(["replicas=2", "replicas=3", "dtype=float64"], [pinned]))
    entry = led["claims"]["modules.x"]
    assert entry["covered"] == {"replicas=2": {"expected violation": 1, "checks": 2},
                                "dtype=float64": {"expected violation": 1, "checks": 1}}
    assert entry["unchecked"] == ["replicas=3"]
    assert "replicas=2: 2 checks (expected violation 1)" in modes.text(led)
    crashed = {**_test("violated", {}), "divergence": "entry 8 (x)"}  # raised before any check held
    assert modes.ledger(_report(["replicas=2"], [crashed])) is None


def test_a_mode_only_a_pinned_test_reaches_is_behind_its_divergence_only_while_it_fails_with_the_symptom():
    """A known divergence's ``modes`` name the claim's modes its pinned test alone reaches: while
    that test fails with the symptom they are listed apart (not unchecked, not checked); a pinned
    test that ran clean, an entry that did not apply, or a mode the entry does not name stays
    unchecked, and --check fails on it."""
    pinned = {**_test("violated", {}), "divergence": "entry 47 (modules.x)"}
    other = _test("holds", {"train": 1})
    status = {"key": "entry 47 (modules.x)", "status": "applied", "modes": ["Nadam", "not-a-mode"]}
    doc = {**_report(["train", "Nadam", "eval"], [other, pinned]), "divergences": [status]}
    led = modes.ledger(doc)
    entry = led["claims"]["modules.x"]
    assert entry["blocked"] == {"Nadam": "entry 47 (modules.x)"}  # an undeclared name blocks nothing
    assert entry["unchecked"] == ["eval"] and (led["declared"], led["unchecked"], led["blocked"]) == (3, 1, 1)
    assert modes.problems(led) == ["modules.x: eval"]
    assert "Nadam: not checked, behind known divergence entry 47 (modules.x)" in modes.text(led)
    assert "1 of 3 documented modes checked over 1 claims, 1 behind a known divergence" in modes.text(led)
    assert "Nadam (behind known divergence entry 47 (modules.x))" in modes.html_section({"modes": led})
    # the pinned test passed (the bug is fixed): no test checked Nadam, and the run says so
    fixed = {**_report(["train", "Nadam"], [other, _test("holds", {})]), "divergences": [status]}
    assert modes.problems(modes.ledger(fixed)) == ["modules.x: Nadam"]
    # another entry's failure does not excuse this entry's modes
    elsewhere = {**_report(["train", "Nadam"], [other, {**pinned, "divergence": "entry 9 (modules.x)"}]),
                 "divergences": [status]}
    assert modes.problems(modes.ledger(elsewhere)) == ["modules.x: Nadam"]


def test_known_divergence_modes_are_parsed_and_each_names_a_documented_mode_of_its_claim():
    from pytest_dlconform.report import divergences

    entry = {"claim": "modules.x", "reason": "r", "expires": "2099-01-01", "tests": ["t"], "exception": "E",
             "message": "m", "framework": "torch", "version": "2.13.*"}
    assert divergences._parse({**entry, "modes": ["Nadam"]}, 1, "f, entry 1").modes == ("Nadam",)
    for bad in ("Nadam", [], [""], [3]):
        with pytest.raises(divergences.DivergenceError, match=r"modes .* must be a non-empty list of the claim's documented "
                                                               r"modes"):
            divergences._parse({**entry, "modes": bad}, 1, "f, entry 1")
    # the shipped file: every mode an entry names is declared by a claim the entry's glob matches
    import fnmatch
    from importlib import resources

    shipped = divergences.load(str(resources.files("pytest_dlconform.report") / "known_divergences.toml"))
    registry = claims.registry()
    named = [(e, m) for e in shipped for m in e.modes]
    assert named, "no shipped entry names modes (the ledger test above has nothing real to stand on)"
    for e, m in named:
        declared = {mode for cid, c in registry.items() if fnmatch.fnmatchcase(cid, e.claim) for mode in c.modes}
        assert m in declared, f"{e.where}: mode {m!r} is not a documented mode of {e.claim}"


def test_ledger_leaves_out_claims_without_modes_or_without_a_run():
    assert modes.ledger(_report([], [_test("holds", {})])) is None
    assert modes.ledger(_report(["a"], [_test("not_applicable", {})])) is None


def test_check_command_fails_on_an_unchecked_mode(tmp_path, capsys):
    from pytest_dlconform.report.document import Report

    def write(tests):
        doc = _report(["train", "eval"], [{**t, "nodeid": f"t{i}", "claim": "modules.x"} for i, t in enumerate(tests)])
        doc["claims"]["modules.x"]["verdict"] = "holds"
        path = tmp_path / "r.json"
        path.write_text(Report.from_dict(doc).to_json())
        return str(path)

    assert modes.main([write([_test("holds", {"train": 1, "eval": 1})]), "--check"]) == 0
    assert "2 of 2 documented modes checked" in capsys.readouterr().out
    assert modes.main([write([_test("holds", {"train": 1})]), "--check"]) == 1
    out = capsys.readouterr()
    assert "eval: UNCHECKED" in out.out
    assert "modules.x: eval" in out.err
    assert modes.main([str(tmp_path / "missing.json")]) == 2


def test_html_section_names_unchecked_modes():
    doc = _report(["train", "eval"], [_test("holds", {"train": 2})])
    page = modes.html_section({"modes": modes.ledger(doc)})
    assert "1 of 2 declared modes checked" in page and '<td class="problem">eval</td>' in page


#: Claims whose suite has no driver on any machine we have, so no test could record a mode:
#: declared when the suite can check them. (tfjs and tfx declare theirs: they run in
#: `tox -e tfjs` / `tox -e tfx`, and are not applicable in the default environment.)
MODES_PENDING = {"export.tfserving.serve": "needs tensorflow_model_server or a Docker engine, and a driver"}


def test_every_claim_of_the_mode_areas_declares_its_modes():
    areas = ("modules", "data", "export", "distributed", "precision", "execution")
    missing = [c.id for c in claims.registry().values() if c.area in areas and not c.modes and c.id not in MODES_PENDING]
    assert not missing, f"claims without modes: {missing}"
    assert all(claims.get(cid) is not None and not claims.get(cid).modes for cid in MODES_PENDING)


def test_check_command_fails_on_an_unvisited_coverage_combination(tmp_path, capsys):
    from pytest_dlconform.report import coverage
    from pytest_dlconform.report.document import Report

    key = {"framework": "torch", "mode": "compiled/inductor", "op": "tanh", "params": "default", "dtype": "float32",
           "layout": "contiguous"}
    registered = [{**key, "regime": "unit"}, {**key, "regime": "large"}]

    def write(regimes):
        rows = [{**key, "regime": r, "count": 1, "inconclusive": 0} for r in regimes]
        test = {**_test("holds", {"train": 1, "eval": 1}), "nodeid": "t0", "claim": "modules.x"}
        test["evidence"]["notes"]["coverage"] = rows
        doc = _report(["train", "eval"], [test])
        doc["claims"]["modules.x"]["verdict"] = "holds"
        report = Report.from_dict(doc)
        path = tmp_path / "r.json"
        path.write_text(report.replace(coverage=coverage.ledger(report, registered)).to_json())
        return str(path)

    assert modes.main([write(["unit", "large"]), "--check"]) == 0
    assert "coverage ledger: 2 combinations visited, 0 registered ones unvisited" in capsys.readouterr().out
    assert modes.main([write(["unit"]), "--check"]) == 1
    err = capsys.readouterr().err
    assert "1 registered op-suite combinations no test visited" in err
    assert "torch, compiled/inductor, tanh, default, large, float32, contiguous" in err


def _claim_file(folder, name, *ids):
    text = "".join(f'[[claim]]\nid = "{cid}"\nstatement = "s"\nsource = "the docstring"\nframeworks = ["torch"]\n\n'
                   for cid in ids)
    (folder / name).write_text(text, encoding="utf-8")


def test_an_area_reads_its_parts_after_its_file_and_refuses_an_id_in_two_files(tmp_path):
    _claim_file(tmp_path, "modules.toml", "modules.a.x")
    _claim_file(tmp_path, "modules.zeta.toml", "modules.z.x")
    _claim_file(tmp_path, "modules.losses.toml", "modules.l.x")
    _claim_file(tmp_path, "data.toml", "data.d.x")
    _claim_file(tmp_path, "modules.toml.bak", "modules.b.x")  # not a TOML file name: ignored
    assert list(claims.load(tmp_path)) == ["data.d.x", "modules.a.x", "modules.l.x", "modules.z.x"]
    _claim_file(tmp_path, "modules.more.toml", "modules.a.x")
    with pytest.raises(claims.RegistryError, match=r"claims/modules.more.toml: duplicate claim id modules.a.x"):
        claims.load(tmp_path)
    _claim_file(tmp_path, "modules.more.toml", "modules")
    with pytest.raises(claims.RegistryError, match=r"claims/modules.more.toml, claim modules: id must look like"):
        claims.load(tmp_path)
