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
