"""export.torchserve.serve: a real TorchServe on 127.0.0.1 predicts what local inference predicts.

One server per test run serves every generated model: archiving is cheap, a server start
(Java frontend, one Python worker per model) is not. The server is stopped with
`torchserve --stop` in all cases, and the test checks that no process of it is left.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_dlconform.api import evidence, not_applicable, serving
from pytest_dlconform.api import roundtrip as rt

SPECS = rt.model_specs(widths=(1, 16), dense=(1, 3))


def _archive_model(torch: Any, spec: rt.ModelSpec, name: str, work: Path, store: Path, *, like_the_seed: bool) -> Path:
    """TorchScript file + handler + config.json, archived; the seed's flags, fixed where needed."""
    folder = work / name
    folder.mkdir()
    art = rt.export_artifact(folder / "torchscript", "torchscript",
                             lambda p: torch.jit.save(torch.jit.script(rt.build_torch(spec, torch)), str(p)))
    handler = folder / "handler.py"
    handler.write_text(serving.HANDLER_SOURCE, encoding="utf-8")
    config = folder / "config.json"
    config.write_text(json.dumps({"dtype": spec.dtype, "spec": spec.to_json()}), encoding="utf-8")
    # The seed's command has no --export-path: the archive lands in the working folder.
    landed = serving.archive(name, art.main, handler, [config], export_path=None if like_the_seed else store, cwd=folder)
    if like_the_seed:
        # torch-model-archiver --help, --export-path: "If --export-path is not specified, the file will be
        # saved in the current working directory."
        assert landed.parent == folder and not (store / landed.name).exists(), "archiver wrote outside the working folder"
        evidence.note(seed_archive_lands_in="the working folder, not the model store")
        landed = landed.rename(store / landed.name)  # the fix: the model store is where --models looks
    return landed


@pytest.mark.claim("export.torchserve.serve")
def test_torchserve_predicts_what_local_inference_predicts(torch, tmp_path, dl_settings):
    reason = serving.missing_requirements()
    if reason:
        not_applicable(reason)
    evidence.note(**serving.undeclared_yaml())
    server = serving.TorchServe(tmp_path / "server", startup_timeout=dl_settings.timeout)
    cases: list[tuple[str, rt.ModelSpec, list[np.ndarray]]] = []  # model name, spec, inputs

    @rt.examples(3)
    @given(spec=SPECS, batches=st.lists(st.integers(1, 5), min_size=1, max_size=3), seed=st.integers(0, 2**32 - 1))
    def archive_examples(spec: rt.ModelSpec, batches: list[int], seed: int) -> None:
        name = f"m{len(cases)}"
        _archive_model(torch, spec, name, tmp_path, server.store, like_the_seed=not cases)
        cases.append((name, spec, rt.example_inputs(spec, batches, seed)))

    archive_examples()
    with server:
        server.start({name: f"{name}.mar" for name, _, _ in cases})
        evidence.note(startup_seconds=round(server.wait_ready([n for n, _, _ in cases]), 2), models=len(cases))
        refused = server.predict(cases[0][0], {"inputs": cases[0][2][0].tolist()}, token=None)
        assert refused.status in (400, 401, 403), f"a request without the token got HTTP {refused.status}: {refused.body}"
        evidence.covers("token-auth")
        evidence.note(without_token=f"HTTP {refused.status} {refused.body.get('type') if isinstance(refused.body, dict) else ''}")
        for name, spec, inputs in cases:
            _served_like_local(server, tmp_path / name / "torchscript", name, spec, inputs)
        evidence.covers("predict")
        pids = server.alive()
    report = server.last_stop
    evidence.note(stop_seconds=round(report.seconds, 2), processes_while_serving=len(pids), killed_after_stop=report.killed)
    assert not report.leftover, f"processes of the server still alive after stop and SIGKILL: {report.leftover}"
    assert report.graceful, (f"`torchserve --stop` left processes {report.killed} running for "
                             f"{server.stop_timeout:g} s (killed them)")
    evidence.covers("stop")


def _served_like_local(server: serving.TorchServe, artifact: Path, name: str, spec: rt.ModelSpec,
                       inputs: list[np.ndarray]) -> None:
    local = rt.load(artifact, "torchscript")
    for x in inputs:
        r = server.predict(name, {"inputs": x.tolist()})
        if r.status != 200:
            pytest.fail(f"TorchServe model {name} ({spec.describe()}) answered HTTP {r.status}: {r.body}")
        got = np.asarray(r.body["outputs"], dtype=spec.dtype)
        # The worker runs the same TorchScript file in another process (its own thread count).
        rt.assert_close_outputs({"y": got}, {"y": local.run(x)["output_0"]}, rt.model_tolerance(spec),
                                scale=rt.magnitudes(spec, [x], "torch")[0],
                                what=f"TorchServe {name} ({spec.describe()}), batch {x.shape[0]}", name="served vs local")
