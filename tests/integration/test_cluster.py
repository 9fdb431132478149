"""The localhost launcher (pytest_dlconform.harness) with real processes, torch and TensorFlow.

A conformance run must never hang a CI job: a rank that exits, a peer that never joins
and a collective that never completes each end the call within its deadline, with a
message naming the rank that did not arrive, and no process of the group is left (checked
through /proc and the ranks' process groups). The next group then works normally.
Deadline bounds carry a generous margin: they fail only if the deadline is not enforced.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from pytest_dlconform.checks import reductions as oracle
from pytest_dlconform.frameworks.fresh import run_python
from pytest_dlconform.harness import clusters, groups, netns, ports, processes
from pytest_dlconform.harness import distribution as dist
from pytest_dlconform.harness.groups import ClusterError, LocalGroup, TaskError
from pytest_dlconform.harness.pool import GroupPool
from pytest_dlconform.harness.rank import WorkerContext
from pytest_dlconform.suites.distributed import torch_programs

MARGIN_S = 20.0  # what a loaded CI machine may add to a deadline before the error is raised
REPO = Path(__file__).resolve().parents[2]


# ------------------------------------------------------------------ programs run in the ranks


def echo(ctx: WorkerContext, payload: Any) -> tuple[int, int, int, Any]:
    return ctx.rank, ctx.world_size, os.getpid(), payload


def remember(ctx: WorkerContext, value: Any) -> Any:
    previous = ctx.state.get("value")
    ctx.state["value"] = value
    return previous


def stall(ctx: WorkerContext, spec: dict[str, Any]) -> int:
    """Rank spec["rank"] exits or sleeps before the barrier; the others arrive and wait."""
    if ctx.rank == spec["rank"]:
        if spec.get("exit") is not None:
            os._exit(spec["exit"])
        time.sleep(spec["sleep"])
    ctx.arrive("barrier")
    time.sleep(spec.get("others_sleep", 0))
    return ctx.rank


def fail_in(ctx: WorkerContext, spec: dict[str, Any]) -> int:
    if ctx.rank in spec["ranks"]:
        raise ValueError(f"planted error in rank {ctx.rank}")
    time.sleep(spec.get("others_sleep", 0))
    return ctx.rank


def spawn_grandchild(ctx: WorkerContext, _: Any) -> int:
    """A rank that starts a process of its own, which must die with the group."""
    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3600)"]).pid


def late_torch_setup(ctx: WorkerContext, cfg: dict[str, Any]) -> Any:
    """torch_setup, except that rank cfg["late"] never gets to init_process_group."""
    if ctx.rank == cfg["late"]:
        time.sleep(3600)
    return dist.torch_setup(ctx, cfg)


def late_multiworker_setup(ctx: WorkerContext, cfg: dict[str, Any]) -> Any:
    if ctx.rank == cfg["late"]:
        time.sleep(3600)
    return dist.tf_multiworker_setup(ctx, cfg)


def meet_on_loopback(ctx: WorkerContext, port: int) -> dict[str, Any]:
    """Rank 0 listens on every interface of its namespace, rank 1 connects over 127.0.0.1."""
    import socket

    ns = os.stat("/proc/self/ns/net").st_ino
    if ctx.rank == 0:
        with socket.socket() as s:
            s.bind(("0.0.0.0", port))
            s.listen()
            ctx.arrive("listening")
            conn, _ = s.accept()
            with conn:
                return {"ns": ns, "got": conn.recv(16).decode()}
    for _ in range(600):
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=5) as c:
                c.sendall(b"hello")
                return {"ns": ns, "sent": True}
        except ConnectionRefusedError:
            time.sleep(0.05)
    raise AssertionError("rank 0 never listened")


def collective(ctx: WorkerContext, spec: dict[str, Any]) -> list[float]:
    """all_reduce of ones; rank spec["absent"] exits (spec["exit"]) or sleeps instead."""
    import torch
    import torch.distributed as tdist

    if ctx.rank == spec.get("absent"):
        if spec.get("exit") is not None:
            os._exit(spec["exit"])
        time.sleep(3600)
    x = torch.ones(2)
    ctx.arrive("all_reduce")
    tdist.all_reduce(x)
    return x.tolist()


# ------------------------------------------------------------------ helpers


def _assert_gone(group: LocalGroup | ClusterError) -> None:
    """No process of the group is left: none carries its token, no rank's session has members."""
    left = processes.survivors(group.token)
    assert left == [], f"processes of the group survived: {left}"
    members = {pid: processes.group_members(pid) for pid in group.pids}
    assert not any(members.values()), f"process groups of the ranks still have members: {members}"


def _torch_group(world: int, *, setup: Any = dist.torch_setup, late: int | None = None, timeout: float = 60.0,
                 collective_timeout: float = 300.0) -> LocalGroup:
    iface = ports.loopback_interface()
    return LocalGroup.start(
        f"test-torch-{world}", world, timeout=timeout,
        env=lambda rank, _: {"CUDA_VISIBLE_DEVICES": "", "GLOO_SOCKET_IFNAME": iface, "OMP_NUM_THREADS": "1"},
        setup=setup, setup_payload={"backend": "gloo", "timeout": collective_timeout, "init_method": None,
                                    "threads": 1, "late": late},
        teardown=dist.torch_teardown,
    )


def _private_network() -> netns.PrivateNetwork:
    """A fresh private network namespace, or a skip that says why none can be made here."""
    try:
        return netns.create()
    except netns.Unavailable as exc:
        pytest.skip(f"no private network namespace can be made here: {exc}")


@pytest.fixture
def group() -> Any:
    g = LocalGroup.start("test-plain", 3, timeout=30)
    yield g
    g.close()
    _assert_gone(g)


# ------------------------------------------------------------------ the launcher itself


def test_a_program_runs_on_every_rank_and_state_persists(group):
    out = group.run(echo, {"x": 1})
    assert sorted(out) == [0, 1, 2]
    assert [out[r][:2] for r in range(3)] == [(r, 3) for r in range(3)]
    assert len({out[r][2] for r in range(3)}) == 3 and all(out[r][3] == {"x": 1} for r in range(3))
    group.run(remember, "first")
    assert group.run(remember, "second") == {0: "first", 1: "first", 2: "first"}
    assert group.run(echo, None, ranks=[1]).keys() == {1}


def test_a_rank_that_exits_fails_the_call_at_once_naming_it(group):
    start = time.monotonic()
    with pytest.raises(ClusterError, match=(r"(?s)rank 2 \(pid \d+\) exited with code 7 .*last seen at 'start stall'"
                                            r".*ranks \[0, 1\] were killed")) as err:
        group.run(stall, {"rank": 2, "exit": 7, "others_sleep": 3600}, timeout=60)
    assert time.monotonic() - start < MARGIN_S  # a death is noticed at once, not at the deadline
    assert err.value.died == (2,) and not group.alive
    _assert_gone(group)


def test_a_rank_that_never_arrives_fails_within_the_deadline_naming_it(group):
    deadline = 3.0
    start = time.monotonic()
    with pytest.raises(ClusterError,
                       match=r"(?s)within its deadline \(3 s\): .*rank 1 \(pid \d+\) did not arrive at 'barrier'") as err:
        group.run(stall, {"rank": 1, "sleep": 3600, "others_sleep": 3600}, timeout=deadline)
    assert time.monotonic() - start < deadline + MARGIN_S
    assert err.value.missing == (1,)
    assert "rank 0" in str(err.value) and "waiting at 'barrier'" in str(err.value)
    _assert_gone(group)


def test_a_program_error_is_reported_and_the_group_lives_on(group):
    with pytest.raises(TaskError, match=r"rank 1 raised ValueError: planted error in rank 1") as err:
        group.run(fail_in, {"ranks": [1]})
    assert [e.rank for e in err.value.errors] == [1] and "Traceback" in err.value.errors[0].traceback
    assert group.alive and sorted(group.run(echo, None)) == [0, 1, 2]


def test_an_error_while_the_others_wait_forever_ends_the_group():
    g = LocalGroup.start("test-grace", 2, timeout=6)
    with pytest.raises(ClusterError, match=r"rank 0 raised ValueError: planted error in rank 0"):
        g.run(fail_in, {"ranks": [0], "others_sleep": 3600})
    _assert_gone(g)


def test_grandchildren_die_with_the_group():
    g = LocalGroup.start("test-tree", 2, timeout=30)
    pids = g.run(spawn_grandchild, None)
    g.close()
    assert set(processes.survivors(g.token)).isdisjoint(pids.values()), "a grandchild outlived its group"
    _assert_gone(g)


def test_a_group_whose_start_cannot_finish_is_killed_within_the_deadline():
    start = time.monotonic()
    with pytest.raises(ClusterError,
                       match=r"(?s)setup of test-start did not complete .*rank 1 .*did not arrive at 'barrier'") as err:
        LocalGroup.start("test-start", 2, timeout=3, setup=stall, setup_payload={"rank": 1, "sleep": 3600, "others_sleep": 3600})
    assert time.monotonic() - start < 3 + MARGIN_S
    _assert_gone(err.value)


def test_the_pool_restarts_a_group_that_died():
    pool = GroupPool()
    try:
        first = pool.get("g", lambda: LocalGroup.start("test-pool", 2, timeout=30))
        with pytest.raises(ClusterError):
            first.run(stall, {"rank": 0, "exit": 1})
        second = pool.get("g", lambda: LocalGroup.start("test-pool", 2, timeout=30))
        assert second is not first and sorted(second.run(echo, None)) == [0, 1]
    finally:
        pool.close()
    _assert_gone(first)
    _assert_gone(second)


# ------------------------------------------------------------------ in a private network namespace


def test_ranks_of_a_group_with_a_private_network_share_it_and_meet_on_its_loopback():
    network = _private_network()
    port = network.addresses(1)[0].rsplit(":", 1)[1]
    g = LocalGroup.start("test-netns", 2, timeout=30, network=network)
    try:
        assert network.fds == {}, "the group keeps the namespace descriptors open after its ranks joined"
        out = g.run(meet_on_loopback, int(port), timeout=60)
    finally:
        g.close()
    assert out[0]["ns"] == out[1]["ns"] != os.stat("/proc/self/ns/net").st_ino, out
    assert out[0]["got"] == "hello" and "private network namespace" in g.network, (out, g.network)
    _assert_gone(g)


def test_deadlines_and_messages_are_the_same_in_a_private_network():
    g = LocalGroup.start("test-netns-stall", 3, timeout=30, network=_private_network())
    start = time.monotonic()
    with pytest.raises(ClusterError, match=r"(?s)within its deadline \(3 s\): .*rank 1 \(pid \d+\) did not arrive at 'barrier'"):
        g.run(stall, {"rank": 1, "sleep": 3600, "others_sleep": 3600}, timeout=3)
    assert time.monotonic() - start < 3 + MARGIN_S
    _assert_gone(g)
    g = LocalGroup.start("test-netns-exit", 2, timeout=30, network=_private_network())
    pids = g.run(spawn_grandchild, None, ranks=[0])
    with pytest.raises(ClusterError, match=r"(?s)rank 1 \(pid \d+\) exited with code 7 .*ranks \[0\] were killed"):
        g.run(stall, {"rank": 1, "exit": 7, "others_sleep": 3600}, timeout=60)
    assert set(processes.survivors(g.token)).isdisjoint(pids.values()), "a grandchild outlived its group"
    _assert_gone(g)


def test_a_rank_that_cannot_join_the_namespace_fails_the_start_at_once_naming_it():
    """A namespace descriptor that is not the one announced (here: this process's own)."""
    wrong = netns.PrivateNetwork("net", 1, {"net": os.open("/proc/self/ns/net", os.O_RDONLY | os.O_CLOEXEC)})
    start = time.monotonic()
    with pytest.raises(ClusterError, match=r"(?s)rank \d \(pid \d+\) exited with code 3 during start of test-badns, "
                                           r"last seen at 'process start'; its stderr:\n    dlconform: cannot join "
                                           r"the cluster's private network namespace: ") as err:
        LocalGroup.start("test-badns", 2, timeout=60, network=wrong)
    assert time.monotonic() - start < MARGIN_S
    _assert_gone(err.value)


def test_port_leases_of_two_processes_never_overlap():
    code = (
        "import json, sys, time\n"
        "from pytest_dlconform.harness.ports import lease_ports\n"
        "lease = lease_ports(20)\n"
        "print(json.dumps(lease.ports), flush=True)\n"
        "sys.stdin.readline()\n"
    )
    other = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        theirs = set(json.loads(other.stdout.readline()))
        mine = ports.lease_ports(40)
        assert theirs and not theirs & set(mine.ports), f"ports leased twice: {sorted(theirs & set(mine.ports))}"
        assert len(set(mine.ports)) == 40 and all(a.startswith("127.0.0.1:") for a in mine.addresses())
        mine.release()
    finally:
        other.communicate("\n", timeout=30)


def test_outer_cluster_detection():
    assert clusters.external_torch_env({}) is None
    env = {"RANK": "3", "WORLD_SIZE": "4", "LOCAL_RANK": "1", "MASTER_ADDR": "10.0.0.1", "MASTER_PORT": "29500"}
    assert clusters.external_torch_env(env) == clusters.TorchEnv(3, 4, 1)
    assert clusters.external_tf_config({}) is None
    config = clusters.tf_config({"worker": ["a:1", "b:2"]}, "worker", 1)
    assert clusters.external_tf_config({"TF_CONFIG": config})["task"] == {"type": "worker", "index": 1}
    with pytest.raises(dist.HarnessError, match="not JSON"):
        clusters.external_tf_config({"TF_CONFIG": "{"})


def test_attached_group_runs_programs_in_this_process():
    g = groups.AttachedGroup("outer", rank=2, world_size=4, timeout=10)
    assert g.local_ranks == (2,)
    assert g.run(echo, "x") == {2: (2, 4, os.getpid(), "x")}
    assert g.run(echo, "x", ranks=[0]) == {}


# ------------------------------------------------------------------ torch process groups


def test_torch_group_listens_on_loopback_only():
    g = _torch_group(2)
    try:
        listening = processes.listening_addresses(g.pids)
        assert listening and all(addr == "127.0.0.1" for addr, _ in listening), f"ranks listen on {listening}"
    finally:
        g.close()
    _assert_gone(g)


def test_torch_peer_that_never_joins_init_process_group():
    start = time.monotonic()
    with pytest.raises(ClusterError, match=r"rank 1 \(pid \d+\) did not arrive at 'init_process_group'") as err:
        _torch_group(2, setup=late_torch_setup, late=1, timeout=25)
    assert time.monotonic() - start < 25 + MARGIN_S
    assert err.value.missing == (1,)
    _assert_gone(err.value)


def test_torch_rank_that_dies_during_a_collective():
    g = _torch_group(2)
    start = time.monotonic()
    with pytest.raises(ClusterError, match=r"rank 1 \(pid \d+\) exited with code 3"):
        g.run(collective, {"absent": 1, "exit": 3}, timeout=60)
    assert time.monotonic() - start < 60
    _assert_gone(g)


def test_torch_collective_that_never_completes():
    g = _torch_group(2)  # torch's own collective timeout is 300 s here: the deadline must end it
    with pytest.raises(ClusterError, match=(r"(?s)rank 0 .*was waiting at 'all_reduce'"
                                            r".*rank 1 \(pid \d+\) did not arrive at 'all_reduce'"
                                            r"|rank 1 \(pid \d+\) did not arrive at 'all_reduce'")):
        g.run(collective, {"absent": 1}, timeout=5)
    _assert_gone(g)
    again = _torch_group(2)  # the next group runs normally
    try:
        assert again.run(collective, {}) == {0: [2.0, 2.0], 1: [2.0, 2.0]}
    finally:
        again.close()
    _assert_gone(again)


# ------------------------------------------------------------------ TensorFlow clusters


def test_multiworker_missing_peer_is_bounded_and_named():
    """MultiWorkerMirroredStrategy waits for its peers: a worker that never starts TensorFlow
    keeps the others waiting; the start deadline ends it and names that worker."""
    network = _private_network()  # as the suites run it: the servers are reachable on its loopback only
    spec = {"worker": network.addresses(2)}
    deadline = 60.0  # TensorFlow's import alone takes 5-20 s on a loaded 2-core machine
    start = time.monotonic()
    with pytest.raises(ClusterError, match=r"rank 1 \(pid \d+\) did not arrive at 'MultiWorkerMirroredStrategy\(\)'") as err:
        LocalGroup.start("test-mw", 2, timeout=deadline,
                         env=lambda rank, _: {"TF_CONFIG": clusters.tf_config(spec, "worker", rank), "CUDA_VISIBLE_DEVICES": ""},
                         setup=late_multiworker_setup, setup_payload={"timeout": 600, "threads": 1, "late": 1},
                         network=network)
    assert time.monotonic() - start < deadline + MARGIN_S
    assert err.value.missing == (1,)
    _assert_gone(err.value)


# ------------------------------------------------------------------ inside an outer cluster


def _in_namespace(network: netns.PrivateNetwork, cmd: list[str], env: dict[str, str]) -> tuple[list[str], dict[str, str]]:
    """``cmd`` run inside ``network``: a Python prelude joins it, then execs ``cmd`` (the
    namespace stays). An outer cluster listens beyond loopback by design (TF_CONFIG's
    servers on every interface, torchrun's store): in these tests nothing can reach it."""
    execs = netns.RANK_PRELUDE + "import os, sys; os.execvp(sys.argv[1], sys.argv[1:])"
    return [sys.executable, "-c", execs, *cmd], {**env, netns.NETNS_VAR: network.child_env()}


@pytest.mark.skipif(not (Path(sys.executable).parent / "torchrun").exists(), reason="torchrun is not installed")
def test_suites_attach_to_a_torchrun_group():
    """Started by torchrun, the torch suites use its group (env://) instead of launching one."""
    torchrun = Path(sys.executable).parent / "torchrun"
    cmd = [str(torchrun), "--standalone", "--nproc-per-node", "2", "-m", "pytest", "suites/distributed", "-q",
           "-p", "no:cacheprovider", "-p", "no:xdist", "-W", "ignore::DeprecationWarning",
           "--dl-claims", "distributed.torch.*", "--dl-device", "cpu", "--dl-profile", "quick"]
    env = {k: v for k, v in os.environ.items() if k not in clusters.OUTER_CLUSTER_VARS}
    network = _private_network()
    cmd, env = _in_namespace(network, cmd, {**env, "GLOO_SOCKET_IFNAME": "lo"})  # the only interface there
    try:
        proc = subprocess.run(cmd, check=False, cwd=REPO, env=env, capture_output=True, text=True, timeout=300,
                              start_new_session=True, pass_fds=network.pass_fds())
    finally:
        network.close()
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    # Both ranks ran every torch claim, and all held (SyncBatchNorm is GPU-only: not applicable on CPU ranks).
    assert proc.stdout.count("claims: 5 holds, 0 violated, 1 not applicable, 0 error") == 2, proc.stdout[-3000:]
    assert proc.stdout.count("SyncBatchNorm layers only work with GPU modules") == 2, proc.stdout[-3000:]


def test_suites_attach_to_a_tf_config_cluster():
    """Every host of a TF_CONFIG cluster runs pytest; the multi-worker suites use that cluster."""
    network = _private_network()  # both "hosts" share it
    spec = {"worker": network.addresses(2)}
    base = {k: v for k, v in os.environ.items() if k not in clusters.OUTER_CLUSTER_VARS}
    cmd = [sys.executable, "-m", "pytest", "suites/distributed", "-q", "-p", "no:cacheprovider", "-p", "no:xdist",
           "-W", "ignore::DeprecationWarning", "--dl-strategy", "multi-worker", "--dl-device", "cpu",
           "--dl-claims", "distributed.multiworker.equivalence,distributed.mirrored.reduce", "--dl-profile", "quick"]
    procs = []
    try:
        for i in range(2):
            argv, env = _in_namespace(network, cmd, {**base, "TF_CONFIG": clusters.tf_config(spec, "worker", i)})
            procs.append(subprocess.Popen(argv, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                          text=True, start_new_session=True, pass_fds=network.pass_fds()))
    finally:
        network.close()
    try:
        outputs = [p.communicate(timeout=400)[0] for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                os.killpg(p.pid, 9)
    for p, out in zip(procs, outputs):
        assert p.returncode == 0, out[-4000:]
        assert "claims: 2 holds, 0 violated, 0 not applicable, 0 error" in out, out[-4000:]


# ------------------------------------------------------------------ the step oracle against wrong data parallelism


def _small_case(**extra: Any) -> dist.TrainCase:
    import numpy as np

    rng = np.random.default_rng(7)
    weights = (rng.normal(size=(3, 4)) / 2, rng.normal(size=4) * 0.1, rng.normal(size=(4, 2)) / 2, rng.normal(size=2) * 0.1)
    return dist.TrainCase((3, 4, 2), "tanh", weights, rng.uniform(-1, 1, (8, 3)), rng.uniform(-1, 1, (8, 2)),
                          "adam", 0.1, "float64", **extra)


def test_step_oracle_fails_ranks_that_do_not_synchronise_gradients():
    """Each rank training alone on its shard (no DDP) must fail both checks; DDP passes them."""
    case = _small_case(rank_batch=2)
    g = _torch_group(2)
    try:
        alone = g.run(torch_programs.torch_train_cases, {"wrap": "none", "cases": [case]})
        ddp = g.run(torch_programs.torch_train_cases, {"wrap": "ddp", "cases": [case]})
    finally:
        g.close()
    expected = dist.torch_single_process_steps(case, dist.sampler_batches(case, 2))
    tol = oracle.step_tolerance("float64", layers=2, steps=2, batch=4)
    with pytest.raises(oracle.ReplicaMismatch, match="replica 1's tensor 0 differs"):
        oracle.check_replicas_agree([alone[0][0].weights, alone[1][0].weights], what="unsynchronised ranks")
    with pytest.raises(oracle.StepMismatch, match=r"rank 0: weight 0 max\|distributed - single device\|"):
        oracle.check_weights(alone[0][0].weights, expected, tol, what="rank 0")
    oracle.check_replicas_agree([ddp[0][0].weights, ddp[1][0].weights], what="DDP ranks")
    oracle.check_weights(ddp[0][0].weights, expected, tol, what="DDP rank 0")


def test_step_oracle_fails_a_custom_loop_that_averages_per_replica():
    """reduce_mean inside strategy.run (instead of compute_average_loss) sums N replica
    means: N times the step. The oracle must fail it and pass the documented loop."""
    code = """
from dataclasses import replace
from pytest_dlconform.frameworks import adapter
adapter("tensorflow").configure(threads=1, logical_cpus=2)
from pytest_dlconform.harness import distribution as D
from pytest_dlconform.checks import reductions as R
from pytest_dlconform.suites.distributed import tf_programs
import numpy as np
rng = np.random.default_rng(7)
weights = (rng.normal(size=(3, 4)) / 2, rng.normal(size=4) * 0.1, rng.normal(size=(4, 2)) / 2, rng.normal(size=2) * 0.1)
case = D.TrainCase((3, 4, 2), "tanh", weights, rng.uniform(-1, 1, (8, 3)), rng.uniform(-1, 1, (8, 2)), "sgd", 0.1,
                   "float64", batch=4)
strategy = D.mirrored_strategy(["/CPU:0", "/CPU:1"])
found = {}
for scaling in ("global", "local-mean"):
    result = tf_programs.tf_custom_loop(strategy, replace(case, loss_scaling=scaling))
    expected = D.tf_single_device_steps(replace(case, loss_scaling="global"), result.batches)
    try:
        R.check_weights(result.weights, expected, R.step_tolerance("float64", layers=2, steps=2, batch=4), what=scaling)
        found[scaling] = None
    except R.StepMismatch as exc:
        found[scaling] = str(exc)
emit(found)
"""
    found = run_python(code, timeout=300, env={"CUDA_VISIBLE_DEVICES": ""}, what="custom-loop meta-test")
    assert found["global"] is None, found["global"]
    assert found["local-mean"] and "but should be <=" in found["local-mean"], found
