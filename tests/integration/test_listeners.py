"""Nothing the suites start listens beyond loopback (issue 19).

For the lifetime of each kind of cluster and server the suites start (TensorFlow
MultiWorkerMirrored and ParameterServer clusters, a torch gloo group, an NCCL group where
there are GPUs, TorchServe), a watcher thread reads the TCP listeners of this process's
whole process tree every 0.1 s from /proc/<pid>/net/tcp and tcp6 of every network
namespace the tree is in (``netns.listeners``: socket inodes mapped through
/proc/<pid>/fd), and the test fails on any listener that can be reached from beyond
loopback. A TensorFlow server listens on ``[::]`` (it has no bind-address option): that is
allowed only inside a private namespace whose only addresses are loopback ones.

The meta-tests show that the checker fails on a socket listening on 0.0.0.0, on ``::`` and
on a non-loopback address of the checker's own namespace (they run, checker included, in
a private namespace of their own, so that even these sockets cannot be reached), and on
a wildcard inside another private namespace that has a non-loopback address; and that it
passes loopback listeners. The last part runs the
launcher where no namespace can be made (a user namespace without capabilities whose
limit of nested user namespaces is 0, itself inside a private namespace, so that even the
opt-in path listens on nothing reachable): the claims report "not applicable" with what
was tried, and ``--dl-allow-listen-all=yes`` runs them on that process's network.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from pytest_dlconform.harness import distribution as dist
from pytest_dlconform.harness import netns, serving
from pytest_dlconform.harness.clusters import OUTER_CLUSTER_VARS
from pytest_dlconform.harness.rank import WorkerContext

TIMEOUT = 120.0  # start deadline of each cluster; TensorFlow's import alone takes 5-20 s on a loaded 2-core machine
SAMPLE_S = 0.1
REPO = Path(__file__).resolve().parents[2]
HOST_NS = os.stat("/proc/self/ns/net").st_ino


# ------------------------------------------------------------------ the checker


def _private_network() -> netns.PrivateNetwork:
    """A fresh private network namespace, or a skip that says why none can be made here."""
    try:
        return netns.create()
    except netns.Unavailable as exc:
        pytest.skip(f"no private network namespace can be made here: {exc}")


class ListenerWatch:
    """Samples the listeners of this process's tree while the ``with`` block runs."""

    def __init__(self) -> None:
        self.seen: dict[tuple[Any, ...], netns.Listener] = {}
        self.samples = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def sample(self) -> None:
        for item in netns.listeners(netns.process_tree(os.getpid())):
            self.seen.setdefault((item.netns, item.address, item.port, item.pids), item)
        self.samples += 1

    def _loop(self) -> None:
        while not self._stop.is_set():
            self.sample()
            self._stop.wait(SAMPLE_S)

    def __enter__(self) -> ListenerWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def of(self, pids: Any) -> list[netns.Listener]:
        return [item for item in list(self.seen.values()) if set(item.pids) & set(pids)]  # the sampler adds


def assert_loopback_only(watch: ListenerWatch, what: str) -> None:
    __tracebackhide__ = True
    exposed = [item for item in watch.seen.values() if item.exposed]
    assert not exposed, f"{what}: listening beyond loopback: " + "; ".join(item.line() for item in exposed)


LISTEN = ("import socket, sys, time\n"
          "host = sys.argv[1]\n"
          "s = socket.socket(socket.AF_INET6 if ':' in host else socket.AF_INET)\n"
          "s.bind((host, 0)); s.listen()\n"
          "print(s.getsockname()[1], flush=True)\n"
          "sys.stdin.read()\n")


def _listener(host: str, network: netns.PrivateNetwork | None = None) -> subprocess.Popen[str]:
    """A child process listening on ``host`` (in ``network`` when given) until stdin closes."""
    env = dict(os.environ)
    code = LISTEN
    if network is not None:
        env[netns.NETNS_VAR] = network.child_env()
        code = netns.RANK_PRELUDE + "\n" + LISTEN  # joins the namespace first, like a rank
    proc = subprocess.Popen([sys.executable, "-c", code, host], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            text=True, env=env, pass_fds=network.pass_fds() if network else ())
    if network is not None:
        network.close()
    assert proc.stdout is not None and proc.stdout.readline().strip().isdigit(), f"listener on {host} did not start"
    return proc


def _stop(proc: subprocess.Popen[str]) -> None:
    proc.communicate("", timeout=30)


def _watched(host: str, network: netns.PrivateNetwork | None = None) -> tuple[ListenerWatch, int]:
    with ListenerWatch() as watch:
        proc = _listener(host, network)
        watch.sample()
        _stop(proc)
    return watch, proc.pid


# The deliberately exposed listeners are started in a private namespace, with the checker
# running there too: that namespace is then the checker's own ("this process's"), exactly
# like the host's namespace for the real tests, and nothing outside can reach the sockets.
META = """
import json, subprocess, sys
sys.path.insert(0, sys.argv[3])
import test_listeners as t
host, extra = sys.argv[1], sys.argv[2]
if extra:  # a non-loopback address of this namespace, on lo
    subprocess.run(["ip", "addr", "add", extra + "/32", "dev", "lo"], check=True)
watch, pid = t._watched(host)
try:
    t.assert_loopback_only(watch, "meta")
    print(json.dumps({"pid": pid, "error": None}))
except AssertionError as exc:
    print(json.dumps({"pid": pid, "error": str(exc)}))
"""


def _checked_in_own_namespace(host: str, extra: str = "") -> dict[str, Any]:
    network = _private_network()
    if extra and (network.mode != "net" or shutil.which("ip") is None):
        network.close()
        pytest.skip("adding an address inside the namespace needs root and the `ip` command")
    env = {**os.environ, netns.NETNS_VAR: network.child_env()}
    try:
        proc = subprocess.run([sys.executable, "-c", netns.RANK_PRELUDE + "\n" + META, host, extra,
                               str(Path(__file__).parent)], capture_output=True, text=True, timeout=120, env=env,
                              pass_fds=network.pass_fds())
    finally:
        network.close()
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("host", ["0.0.0.0", "::"])
def test_checker_fails_on_a_listener_on_every_interface(host):
    out = _checked_in_own_namespace(host)
    shown = re.escape(f"[{host}]" if ":" in host else host)
    assert out["error"] and re.fullmatch(rf"meta: listening beyond loopback: {shown}:\d+ held by pid\(s\) "
                                         rf"\[{out['pid']}\] in this process's netns net:\[\d+\]", out["error"]), out


def test_checker_fails_on_a_listener_on_a_non_loopback_address():
    out = _checked_in_own_namespace("10.254.0.1", extra="10.254.0.1")
    assert out["error"] and re.fullmatch(rf"meta: listening beyond loopback: 10\.254\.0\.1:\d+ held by pid\(s\) "
                                         rf"\[{out['pid']}\] in this process's netns net:\[\d+\]", out["error"]), out


def test_checker_passes_the_same_listener_on_loopback():
    assert _checked_in_own_namespace("127.0.0.1")["error"] is None


@pytest.mark.parametrize("host", ["127.0.0.1", "::1"])
def test_checker_passes_a_loopback_listener(host):
    watch, pid = _watched(host)
    assert [item.address for item in watch.of([pid])] == [host]  # seen: the pass is not vacuous
    assert_loopback_only(watch, "meta")


def test_checker_passes_a_wildcard_in_a_private_namespace_with_only_loopback():
    watch, pid = _watched("0.0.0.0", _private_network())
    (seen,) = watch.of([pid])
    assert seen.private and seen.netns != HOST_NS and set(seen.ns_addresses) <= {"127.0.0.1", "::1"}, seen
    assert_loopback_only(watch, "meta")


def test_checker_fails_on_a_wildcard_in_a_private_namespace_with_another_address():
    network = _private_network()
    if network.mode != "net" or shutil.which("ip") is None:
        network.close()
        pytest.skip("adding an address inside the namespace needs root and the `ip` command")
    nsfile = f"/proc/self/fd/{network.fds['net']}"
    subprocess.run(["nsenter", f"--net={nsfile}", "ip", "addr", "add", "10.254.0.1/32", "dev", "lo"], check=True,
                   pass_fds=network.pass_fds())
    watch, _ = _watched("0.0.0.0", network)
    with pytest.raises(AssertionError, match=r"0\.0\.0\.0:\d+ held by pid\(s\) \[\d+\] in private netns .*10\.254\.0\.1"):
        assert_loopback_only(watch, "meta")


# ------------------------------------------------------------------ the clusters and servers of the suites


def where(ctx: WorkerContext, _: Any) -> int:
    """The network namespace a rank runs in."""
    return os.stat("/proc/self/ns/net").st_ino


def _cluster_listeners(start: Any, expected: int, what: str) -> list[netns.Listener]:
    with ListenerWatch() as watch:
        group = start()
        try:
            namespaces = set(group.run(where, None).values())
            pids = list(group.pids)
            # A server can bind after the group answers; keep the group alive until the
            # sampler has seen each one (or 30 s), so closing it first cannot hide a listener.
            deadline = time.monotonic() + 30
            while len({(s.netns, s.port) for s in watch.of(pids)}) < expected and time.monotonic() < deadline:
                time.sleep(0.1)
        finally:
            group.close()
    servers = watch.of(pids)
    assert len({(s.netns, s.port) for s in servers}) >= expected, (
        f"{what}: saw {[s.line() for s in servers]} in {watch.samples} samples, expected at least {expected} servers")
    assert_loopback_only(watch, what)
    return servers if namespaces else []


def test_tf_multiworker_cluster_listens_in_its_private_namespace_only():
    handle = dist.StrategyHandle("tensorflow", "multi-worker", 2, "cpu")
    servers = _cluster_listeners(lambda: dist.multiworker_cluster(handle, TIMEOUT), 2, "TF multi-worker")
    assert len({s.netns for s in servers}) == 1 and all(s.private for s in servers), [s.line() for s in servers]


def test_tf_parameter_server_cluster_listens_in_its_private_namespace_only():
    handle = dist.StrategyHandle("tensorflow", "parameter-server", 2, "cpu")
    # the chief (coordinator), 2 workers and 2 ps tasks each have a gRPC server
    servers = _cluster_listeners(lambda: dist.ps_cluster(handle, TIMEOUT), 5, "TF parameter server")
    assert len({s.netns for s in servers}) == 1 and all(s.private for s in servers), [s.line() for s in servers]


def test_torch_gloo_group_listens_on_loopback_only():
    handle = dist.StrategyHandle("torch", "ddp", 2, "cpu")
    servers = _cluster_listeners(lambda: dist.torch_group(handle, TIMEOUT), 1, "torch gloo group")
    assert all(s.loopback for s in servers), [s.line() for s in servers]


def _gpus() -> int:
    from pytest_dlconform.frameworks import adapter

    torch = adapter("torch").module
    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def test_torch_nccl_group_listens_on_loopback_only(monkeypatch):
    gpus = _gpus()
    if gpus == 0:
        pytest.skip("an NCCL group needs CUDA GPUs (one per rank) and this machine has no GPU "
                    "(torch.cuda.is_available() is False): NCCL's listeners are checked on GPU machines only")
    world = min(2, gpus)
    if not os.environ.get("CUDA_VISIBLE_DEVICES"):
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", ",".join(str(i) for i in range(world)))
    handle = dist.StrategyHandle("torch", "ddp", world, "multi-gpu")
    servers = _cluster_listeners(lambda: dist.torch_group(handle, TIMEOUT), 1, f"torch NCCL group of {world}")
    assert all(s.loopback for s in servers), [s.line() for s in servers]


def test_torchserve_listens_on_loopback_only(tmp_path):
    reason = serving.missing_requirements()
    if reason:
        pytest.skip(f"TorchServe cannot run here: {reason}")
    from pytest_dlconform.checks import roundtrip as rt
    from pytest_dlconform.frameworks import adapter

    torch = adapter("torch").module
    spec = rt.ModelSpec(2, (rt.Layer("dense", 1),))
    work = tmp_path / "m0"
    work.mkdir()
    model = work / "model.pt"
    torch.jit.save(torch.jit.script(rt.build_torch(spec, torch)), str(model))
    (work / "handler.py").write_text(serving.HANDLER_SOURCE, encoding="utf-8")
    (work / "config.json").write_text(json.dumps({"dtype": spec.dtype}), encoding="utf-8")
    server = serving.TorchServe(tmp_path / "server", startup_timeout=TIMEOUT)
    serving.archive("m0", model, work / "handler.py", [work / "config.json"], export_path=server.store, cwd=work)
    with ListenerWatch() as watch, server:
        server.start({"m0": "m0.mar"})
        server.wait_ready(["m0"])
        reply = server.predict("m0", {"inputs": [[0.5, -1.0]]})
        pids = server.alive()
    assert reply.status == 200, reply
    servers = watch.of(pids)
    assert len({s.port for s in servers}) >= 3, f"saw {[s.line() for s in servers]}, expected the inference, " \
                                                "management and metrics listeners at least"
    assert_loopback_only(watch, "TorchServe")


# ------------------------------------------------------------------ where no namespace can be made


def _restricted_prefix() -> list[str]:
    """A command prefix: a private network namespace with lo up (so that nothing started
    inside can be reached from anywhere), then a user namespace without capabilities
    whose limit of nested user namespaces is 0: there, both ways to make a namespace fail."""
    if os.geteuid() != 0 or not all(shutil.which(t) for t in ("unshare", "setpriv")):
        pytest.skip("needs root and the unshare and setpriv commands (util-linux) to build a place without namespaces")
    inner = (f"{sys.executable} -c 'from pytest_dlconform.harness.netns import loopback_up; loopback_up()' && "
             "exec unshare --user --map-root-user sh -c 'echo 0 > /proc/sys/user/max_user_namespaces && "
             "exec setpriv --bounding-set=-all --inh-caps=-all \"$@\"' sh \"$@\"")
    return ["unshare", "--net", "sh", "-c", inner, "sh"]


def _run_restricted(code: str, timeout: float = 300) -> Any:
    env = {k: v for k, v in os.environ.items() if k not in OUTER_CLUSTER_VARS}
    proc = subprocess.run([*_restricted_prefix(), sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=timeout, env=env, cwd=REPO, start_new_session=True)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_without_a_namespace_the_reason_names_every_attempt_and_the_opt_in_runs_the_cluster():
    code = """
import json, os
import pytest
from pytest_dlconform.harness import distribution as dist
from pytest_dlconform.harness import netns
out = {}
try:
    netns.create()
except netns.Unavailable as exc:
    out["unavailable"] = str(exc)
try:
    dist.tf_cluster_network(False, 30)
except pytest.skip.Exception as exc:
    out["skip"] = str(exc.msg)
handle = dist.StrategyHandle("tensorflow", "multi-worker", 2, "cpu")
group = dist.multiworker_cluster(handle, 120, allow_listen_all=True)
try:
    out["network"] = group.network
    out["listeners"] = [(l.address, l.private, l.exposed) for l in netns.listeners(group.pids)]
finally:
    group.close()
print(json.dumps(out))
"""
    out = _run_restricted(code)
    assert "unshare(CLONE_NEWNET) failed: Operation not permitted (EPERM)" in out["unavailable"], out
    assert "unshare(CLONE_NEWUSER|CLONE_NEWNET) failed: No space left on device (ENOSPC)" in out["unavailable"], out
    assert out["skip"].startswith("not applicable: TensorFlow's gRPC servers listen on every network interface"), out
    assert out["unavailable"] in out["skip"] and "--dl-allow-listen-all=yes" in out["skip"], out
    # the opt-in: the servers run on that process's own network, listening on every interface of it
    assert out["network"] == "this host's network" and len(out["listeners"]) >= 2, out
    assert all(not private and exposed for _, private, exposed in out["listeners"]), out


def test_without_a_namespace_the_suites_report_not_applicable_with_the_reason():
    code = """
import json, subprocess, sys
cmd = [sys.executable, "-m", "pytest", "suites/distributed", "-q", "-p", "no:cacheprovider", "-p", "no:xdist",
       "--dl-strategy", "multi-worker,parameter-server", "--dl-device", "cpu", "--dl-profile", "quick",
       "--dl-claims", "distributed.ps.async,distributed.multiworker.equivalence", "-rs"]
p = subprocess.run(cmd, capture_output=True, text=True)
print(json.dumps({"rc": p.returncode, "out": p.stdout[-6000:]}))
"""
    out = _run_restricted(code)["out"]
    assert "claims: 0 holds, 0 violated, 2 not applicable, 0 error" in out, out
    assert re.search(r"none can be made here: as uid \d+, unshare\(CLONE_NEWNET\) failed: Operation not permitted", out), out


# ------------------------------------------------------------------ the unprivileged route


UNPRIVILEGED = """
import json, os, subprocess, sys
from pytest_dlconform.harness import netns
try:
    network = netns.create()
except netns.Unavailable as exc:
    print(json.dumps({"unavailable": str(exc)}))
    sys.exit(0)
code = netns.RANK_PRELUDE + '''
import os, socket
s = socket.socket(); s.bind(("0.0.0.0", 20000)); s.listen()
c = socket.create_connection(("127.0.0.1", 20000)); conn, _ = s.accept()
print(os.getuid(), flush=True)
import sys; sys.stdin.read()
'''
env = {**os.environ, netns.NETNS_VAR: network.child_env()}
child = subprocess.Popen([sys.executable, "-c", code], env=env, pass_fds=network.pass_fds(),
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
network.close()
uid = int(child.stdout.readline())
seen = [(l.address, l.private, l.exposed) for l in netns.listeners([child.pid])]
child.communicate("", timeout=30)
print(json.dumps({"mode": network.mode, "uid": uid, "me": os.getuid(), "seen": seen}))
"""


def _unprivileged_python() -> list[str]:
    """A command running Python as uid 65534 (nobody) with this checkout's package on the path."""
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        pytest.skip("needs root and setpriv to run a process as an unprivileged user")
    drop = ["setpriv", "--reuid", "65534", "--regid", "65534", "--clear-groups",
            "env", f"PYTHONPATH={REPO / 'src'}"]
    for python in (sys.executable, "/usr/bin/python3"):  # this one may sit in a folder only root can enter
        if subprocess.run([*drop, python, "-c", "import pytest_dlconform.harness.netns"], capture_output=True).returncode == 0:
            return [*drop, python]
    pytest.skip("no Python that uid 65534 can run with this checkout importable")


def test_an_unprivileged_user_gets_a_namespace_through_a_user_namespace():
    if Path("/proc/sys/kernel/unprivileged_userns_clone").exists() and \
            Path("/proc/sys/kernel/unprivileged_userns_clone").read_text().strip() == "0":
        pytest.skip("this kernel refuses unprivileged user namespaces (kernel.unprivileged_userns_clone=0)")
    proc = subprocess.run([*_unprivileged_python(), "-c", UNPRIVILEGED], capture_output=True, text=True, timeout=120,
                          cwd="/")
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    if "unavailable" in out:
        pytest.skip(f"this kernel refuses an unprivileged network namespace: {out['unavailable']}")
    assert out["mode"] == "user+net" and out["uid"] == out["me"] == 65534, out
    assert out["seen"] == [["0.0.0.0", True, False]], out  # the wildcard is in the private namespace only
