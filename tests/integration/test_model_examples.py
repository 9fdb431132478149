"""The worked examples (examples/) pass every model claim, as a user runs them: the command of
docs/own-model.md on the seed's GAN generator, a tiny BERT, and a torch and a Keras model of a
user's shape. The wall time is recorded in the report, never asserted."""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[2]
EXAMPLES = ("examples.gan:generator", "examples.bert:tiny_bert", "examples.torch_user:tabular_model",
            "examples.keras_user:two_tower")


def test_every_example_passes_every_model_claim(tmp_path, request):
    from pytest_dlconform.core import claims

    report = tmp_path / "report.json"
    cmd = [sys.executable, "-m", "pytest", "--pyargs", "pytest_dlconform.suites.model", "-p", "no:cacheprovider",
           "-p", "no:randomly", f"--dl-report={report}", "--dl-profile=ci", "-q"]
    cmd += [f"--dl-model={ref}" for ref in EXAMPLES]
    started = time.perf_counter()
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=1800)
    request.node.user_properties.append(("model_suite_seconds", round(time.perf_counter() - started, 1)))
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-2000:]
    doc = json.loads(report.read_text())
    model_claims = [cid for cid in claims.registry() if cid.startswith("model.")]
    seen: dict[tuple[str, str], set[str]] = {}
    for cid in model_claims:
        for test in doc["claims"][cid]["tests"]:
            seen.setdefault((cid, test["params"]["model"]), set()).add(test["verdict"])
    missing = [(cid, ref) for cid in model_claims for ref in EXAMPLES if (cid, ref) not in seen]
    assert not missing, f"claims without a test for an example: {missing}"
    assert all(v == {"holds"} for v in seen.values()), {k: v for k, v in seen.items() if v != {"holds"}}
