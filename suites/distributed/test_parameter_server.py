"""distributed.ps.async: ParameterServerStrategy keeps variables on the ps tasks and lets
workers run scheduled functions asynchronously (seed 000: workers compute, parameter
servers store and update the parameters; asynchronous updates).

The cluster is real: a coordinator process (the chief) and the gRPC servers of N workers
and 2 ps tasks on loopback. Asynchrony is shown by outcomes, never by timing: atomic
exactly-once increments, and two scheduled functions that can only both finish if two
workers run them at the same time.
"""

from __future__ import annotations

import re

import pytest

from pytest_dlconform.api import distribution as dist
from pytest_dlconform.api import evidence

from . import tf_programs

VARIABLES = 5
INCREMENTS = 12


@pytest.mark.claim("distributed.ps.async")
@pytest.mark.dl_strategies("parameter-server")
def test_variables_live_on_ps_and_workers_update_asynchronously(tf, dl_strategy, dl_groups, dl_timeout):
    if dl_strategy.replicas < 2:
        pytest.fail("this property needs two workers (--dl-replicas >= 2): two functions must run at once",
                    pytrace=False)
    group = dist.group_for(dl_groups, dl_strategy, dl_timeout)
    seen = group.run(tf_programs.ps_observe, {"variables": VARIABLES, "increments": INCREMENTS, "liveness_s": dl_timeout / 2},
                     ranks=[0], what="parameter-server observations")[0]
    evidence.note(workers=seen["workers"], ps=seen["ps"], first_spins=seen["first_spins"],
                  second_spins=seen["second_spins"], cluster_start_s=dl_groups.started.get(
                      ("tensorflow", "parameter-server", dl_strategy.replicas, dl_strategy.device)))

    tasks = [_ps_task(device) for device in seen["devices"]]
    assert tasks == [i % seen["ps"] for i in range(VARIABLES)], (
        f"variables created in scope() were placed on {seen['devices']}; they should be on the ps tasks, "
        f"round-robin over {seen['ps']} of them (task i mod {seen['ps']})")
    assert _ps_task(seen["counter_device"]) is not None, f"the counter lives on {seen['counter_device']}, not on a ps task"
    evidence.covers("round-robin-placement")
    assert seen["returned"] == list(range(1, INCREMENTS + 1)) and seen["counter"] == INCREMENTS, (
        f"{INCREMENTS} scheduled assign_add(1) returned {seen['returned']} and left {seen['counter']}; each update "
        f"should be applied exactly once, atomically: returns 1..{INCREMENTS} in some order, final value {INCREMENTS}")
    evidence.covers("exactly-once-updates")
    assert seen["first_saw_flag"] == 1 and seen["second_saw_started"] == 1, (
        f"two scheduled functions that wait for each other through ps variables did not both see the other "
        f"(first saw the flag: {seen['first_saw_flag']}, second saw 'started': {seen['second_saw_started']}) "
        f"within {dl_timeout / 2:g} s: the workers did not run them concurrently")
    evidence.covers("concurrent-workers")


def _ps_task(device: str) -> int | None:
    match = re.search(r"/job:ps/replica:\d+/task:(\d+)/", device)
    return int(match.group(1)) if match else None
