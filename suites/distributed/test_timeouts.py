"""distributed.torch.timeout: a collective whose peer never arrives fails within the
process group's timeout instead of blocking (the default timeout is 30 minutes for gloo).

The peer sleeps past the group's timeout instead of calling all_reduce; the others must
get torch's own error. Collectives are asynchronous on NCCL: the ranks wait on the work
handle (torch_programs.torch_stall), so the timeout surfaces as torch's error there too. If
torch ignored the timeout, the harness deadline (--dl-timeout) would end the call: that is
the claim violated, reported as such.
"""

from __future__ import annotations

import datetime

import pytest

from pytest_dlconform.api import distribution as dist
from pytest_dlconform.api import evidence
from pytest_dlconform.api.harness import ClusterError

from . import torch_programs

COLLECTIVE_TIMEOUT_S = 3.0


@pytest.mark.claim("distributed.torch.timeout")
@pytest.mark.dl_strategies("ddp")
def test_collective_without_its_peer_fails_within_the_timeout(torch, dl_strategy, dl_groups, dl_timeout):
    import torch.distributed as tdist

    assert tdist.default_pg_timeout == datetime.timedelta(minutes=30), (
        f"torch.distributed.default_pg_timeout is {tdist.default_pg_timeout}; the reference documents 30 minutes")
    evidence.covers("default-timeout=30min")
    group = dist.group_for(dl_groups, dl_strategy, dl_timeout, world=dist.torch_ranks(dl_strategy))
    if group.world_size < 2:
        pytest.fail("this property needs two ranks (--dl-replicas >= 2)", pytrace=False)
    absent = group.world_size - 1
    spec = {"absent": absent, "timeout": COLLECTIVE_TIMEOUT_S, "sleep": COLLECTIVE_TIMEOUT_S + 2.0}
    try:
        per_rank = group.run(torch_programs.torch_stall, spec, timeout=min(dl_timeout, 10 * COLLECTIVE_TIMEOUT_S + 30),
                             what=f"all_reduce without rank {absent}")
    except ClusterError as exc:
        pytest.fail(f"the all_reduce did not fail by itself within its {COLLECTIVE_TIMEOUT_S:g} s timeout; "
                    f"the harness deadline ended it: {exc}", pytrace=False)
    waiting = {r: out for r, out in per_rank.items() if r != absent}
    evidence.note(**{f"rank {r} elapsed_s": out["elapsed"] for r, out in waiting.items()},
                  errors=sorted({str(out["error"]) for out in waiting.values()}))
    problems = dist.stall_problems(per_rank, absent)
    assert not problems, "; ".join(problems)
    evidence.covers("new_group+timeout")
