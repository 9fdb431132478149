"""GPU-path behaviour that a CPU can show: NCCL-style asynchronous collectives on gloo,
and what fresh interpreters inherit.

NCCL's all_reduce returns before the collective ran; gloo's does the same with
``async_op=True``. The stall program must wait on the work handle, so a missing peer
surfaces as torch's timeout error within the group's timeout, never as a read that
blocks until a watchdog kills the rank; reading without waiting (the wrong program)
returns stale data and the oracle reports it.
"""

from __future__ import annotations

import time

import pytest

from pytest_dlconform.frameworks.fresh import GROWTH_VAR, run_python
from pytest_dlconform.harness import distribution as dist
from pytest_dlconform.harness import ports
from pytest_dlconform.harness.groups import LocalGroup
from pytest_dlconform.suites.distributed import torch_programs

TIMEOUT_S = 2.0


@pytest.fixture(scope="module")
def gloo_pair():
    pytest.importorskip("torch")
    iface = ports.loopback_interface()
    group = LocalGroup.start(
        "test-async-stall", 2, timeout=60,
        env=lambda rank, _: {"CUDA_VISIBLE_DEVICES": "", "GLOO_SOCKET_IFNAME": iface, "OMP_NUM_THREADS": "1"},
        setup=dist.torch_setup, setup_payload={"backend": "gloo", "timeout": 60, "init_method": None, "threads": 1},
        teardown=dist.torch_teardown,
    )
    yield group
    group.close()


def test_waiting_on_the_work_handle_surfaces_the_timeout_error(gloo_pair):
    spec = {"absent": 1, "timeout": TIMEOUT_S, "sleep": TIMEOUT_S + 1.5}
    start = time.monotonic()
    per_rank = gloo_pair.run(torch_programs.torch_stall, spec, timeout=30, what="stall")
    assert time.monotonic() - start < 25  # the group's timeout ended it, not the harness deadline
    assert dist.stall_problems(per_rank, 1) == []
    assert per_rank[0]["runtime_error"] and per_rank[0]["elapsed"] >= TIMEOUT_S * 0.9


def test_reading_without_waiting_is_reported_not_passed(gloo_pair):
    # NCCL's default: the call returns at once; the stale tensor reads as if nothing failed.
    spec = {"absent": 1, "timeout": TIMEOUT_S, "sleep": TIMEOUT_S + 1.5, "wait": False}
    per_rank = gloo_pair.run(torch_programs.torch_stall, spec, timeout=30, what="stall without wait")
    problems = dist.stall_problems(per_rank, 1)
    assert len(problems) == 1 and "returned [1.0, 1.0, 1.0]" in problems[0] and "should raise" in problems[0]


def test_the_oracle_rejects_an_error_that_is_not_the_timeout():
    wrong = {0: {"error": "ValueError: bad", "elapsed": 0.1, "runtime_error": False}, 1: {"absent": True}}
    assert "should raise torch's timeout error" in dist.stall_problems(wrong, 1)[0]


def test_fresh_interpreters_allocate_gpu_memory_as_needed_unless_the_user_decided(monkeypatch):
    code = f"import os\nemit(os.environ.get({GROWTH_VAR!r}))"
    monkeypatch.delenv(GROWTH_VAR, raising=False)
    assert run_python(code, timeout=60) == "true"
    monkeypatch.setenv(GROWTH_VAR, "false")
    assert run_python(code, timeout=60) == "false"
    assert run_python(code, timeout=60, env={GROWTH_VAR: "false"}) == "false"
