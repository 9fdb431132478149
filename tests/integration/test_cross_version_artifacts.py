"""scripts/cross_version_artifacts.py: save with one stack, load with another, and its oracles can fail.

Both halves run here on the same stack (the real cross-version runs are in docs/upgrade-check.md);
then what the "old stack" recorded is altered on purpose, and each oracle must report it:
a state entry one ulp off, outputs beyond the two-evaluation bound, an artifact file altered
after it was written. torch formats only: they need no TensorFlow import.
"""

from __future__ import annotations

import importlib.util
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("torch")

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "cross_version_artifacts.py"


@pytest.fixture(scope="module")
def xva():
    spec = importlib.util.spec_from_file_location("cross_version_artifacts", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def pristine(xva, tmp_path_factory):
    root = tmp_path_factory.mktemp("xva") / "set"
    assert xva.main(["save", str(root), "--frameworks", "torch"]) == 0
    return root


@pytest.fixture
def saved(pristine, tmp_path):
    """A copy per test: each alters its own."""
    return Path(shutil.copytree(pristine, tmp_path / "set"))


def _entries(root: Path) -> list[dict]:
    return json.loads((root / "manifest.json").read_text())["entries"]


def _entry(root: Path, fmt: str) -> dict:
    return next(e for e in _entries(root) if e["format"] == fmt and "not_applicable" not in e)


def _rewrite(root: Path, entry: dict, change) -> None:
    path = root / f"{entry['id']}.npz"
    with np.load(path) as z:
        data = {k: z[k].copy() for k in z.files}
    change(data)
    np.savez(path, **data)


def test_every_torch_format_holds_on_the_same_stack(xva, saved, tmp_path):
    out = tmp_path / "r.json"
    assert xva.main(["load", str(saved), "--json", str(out)]) == 0
    results = json.loads(out.read_text())["results"]
    assert {r["format"] for r in results} == {"torchscript", "torch-export", "state-dict", "torch-optimizer"}
    assert all(r["verdict"] == "holds" and r["state_entries"] > 0 for r in results), results
    assert all(r["outputs_bitwise"] for r in results), "same stack: the same numbers as the saving process got back"


def test_a_state_entry_one_ulp_off_is_a_violation(xva, saved):
    entry = _entry(saved, "torch-optimizer")

    def change(d):
        key = next(k for k in d if k.startswith("state-optimizer") and d[k].dtype.kind == "f" and d[k].size)
        d[key].flat[0] = np.nextafter(d[key].flat[0], np.inf)

    _rewrite(saved, entry, change)
    res = xva.check_entry(saved, entry)
    assert res["verdict"] == "violated" and res["check"] == "state bitwise", res
    assert "1 of" in res["reason"] and "state entries differ" in res["reason"]


def test_outputs_beyond_the_bound_are_a_violation(xva, saved):
    entry = _entry(saved, "torchscript")
    _rewrite(saved, entry, lambda d: d.update({k: v * (1 + 1e-3) + 1e-3 for k, v in d.items() if k.startswith("output-0-")}))
    res = xva.check_entry(saved, entry)
    assert res["verdict"] == "violated" and res["check"] == "outputs within the two-evaluation bound", res
    assert "should be <=" in res["reason"]


def test_an_artifact_altered_after_saving_does_not_load(xva, saved):
    entry = _entry(saved, "state-dict")
    main = saved / "artifacts" / entry["id"] / "state_dict.pt"
    main.write_bytes(main.read_bytes()[:-8])
    res = xva.check_entry(saved, entry)
    assert res["verdict"] == "violated" and res["check"] == "loads", res
    assert "truncated" in res["reason"]


def test_load_of_a_folder_without_manifest_is_one_line_exit_2(xva, tmp_path, capsys):
    assert xva.main(["load", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "run `save" in err
