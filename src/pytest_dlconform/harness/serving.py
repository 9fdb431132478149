"""TorchServe on loopback: archive, start, wait until ready, infer over HTTP, always stop.

The documented workflow (``torch-model-archiver`` then ``torchserve --start --ncs
--model-store ... --models name=file.mar``) as it really works with TorchServe 0.12:

- the archiver writes ``NAME.mar`` into the working folder unless ``--export-path``
  names the model store, and ``--models`` only looks in the model store;
- token authorisation is on by default: every request needs ``Authorization: Bearer
  KEY`` with a key from ``key_file.json``, written into the server's working folder;
- the frontend (Java) starts one Python worker process per model worker; the worker
  imports PyYAML, which torchserve's package metadata does not declare.

Several servers can run at once (one per xdist worker): each gets its own free loopback
ports (a :class:`~.ports.PortLease`, held until the server stops, so no other dlconform
process is handed them between the choice and TorchServe's bind), its own temporary folder
(the launcher keeps its pid file in ``$TMPDIR`` and the
workers' Unix sockets live in the JVM's ``java.io.tmpdir``), and its own process group.
:meth:`TorchServe.stop` runs ``torchserve --stop``, waits, then kills whatever is left in
the group, so no process outlives the server, also when a test fails.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from importlib import metadata, util
from pathlib import Path
from typing import Any

from ..frameworks import HarnessError
from .ports import PortLease
from .processes import group_members, is_alive

ARCHIVER = "torch-model-archiver"
SERVER = "torchserve"
INSTALL_HINT = "pip install torchserve torch-model-archiver pyyaml (and a Java 11+ runtime on PATH)"

# The handler archived with every model: TorchServe's BaseHandler loads the TorchScript
# file and runs inference under no_grad; the handler only decodes a JSON body
# {"inputs": rows} into a tensor of the dtype named in config.json (the seed's
# --extra-files) and encodes {"outputs": rows} back, exactly (floats as JSON numbers).
HANDLER_SOURCE = '''\
import json
import os

import torch
from ts.torch_handler.base_handler import BaseHandler


class JsonRowsHandler(BaseHandler):
    def initialize(self, context):
        super().initialize(context)
        with open(os.path.join(context.system_properties["model_dir"], "config.json")) as f:
            self.config = json.load(f)

    def preprocess(self, data):
        rows = []
        for request in data:
            body = request.get("body") if request.get("body") is not None else request.get("data")
            if isinstance(body, (bytes, bytearray)):
                body = json.loads(body)
            rows.append(body["inputs"])
        self.sizes = [len(r) for r in rows]
        flat = [x for r in rows for x in r]
        return torch.tensor(flat, dtype=getattr(torch, self.config["dtype"]), device=self.device)

    def postprocess(self, data):
        out, start = [], 0
        for n in self.sizes:
            out.append({"outputs": data[start:start + n].cpu().tolist()})
            start += n
        return out
'''


def missing_requirements() -> str | None:
    """Why TorchServe cannot run here (the installer's words), or None when it can."""
    for dist, tool in (("torchserve", SERVER), ("torch-model-archiver", ARCHIVER)):
        try:
            metadata.version(dist)
        except metadata.PackageNotFoundError:
            return f"{dist} is not installed: {INSTALL_HINT}"
        if shutil.which(tool) is None:
            return f"{dist} is installed but its `{tool}` command is not on PATH"
    if util.find_spec("yaml") is None:
        return "PyYAML is not installed; TorchServe's worker imports it but torchserve does not declare it: pip install pyyaml"
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        return "no Java runtime: TorchServe's frontend is a Java program (install a JDK 11+, e.g. openjdk-17-jre-headless)"
    return None


def undeclared_yaml() -> dict[str, Any]:
    """Evidence for the PyYAML gap: what torchserve declares and what its worker imports."""
    requires = metadata.requires("torchserve") or []
    declared = any(r.lower().replace("-", "").startswith("pyyaml") for r in requires)
    spec = util.find_spec("ts.metrics.metric_cache_yaml_impl")
    source = Path(spec.origin).read_text(encoding="utf-8") if spec and spec.origin else ""
    return {"torchserve_declares_pyyaml": declared, "worker_module_imports_yaml": "import yaml" in source}


def archive(name: str, serialized_file: Path, handler: Path, extra_files: Iterable[Path], *,
            export_path: Path | None, cwd: Path, version: str = "1.0", timeout: float = 120.0) -> Path:
    """Run ``torch-model-archiver``; returns where the .mar file really landed."""
    cmd = [ARCHIVER, "--model-name", name, "--version", version, "--serialized-file", str(serialized_file),
           "--handler", str(handler), "--extra-files", ",".join(str(p) for p in extra_files)]
    if export_path is not None:
        cmd += ["--export-path", str(export_path)]
    _run(cmd, cwd=cwd, timeout=timeout, what=f"{ARCHIVER} for model {name!r}")
    landed = (export_path or cwd) / f"{name}.mar"
    if not landed.is_file():
        raise HarnessError(f"{ARCHIVER} exited 0 but {landed} does not exist")
    return landed


def _run(cmd: list[str], *, cwd: Path, timeout: float, what: str, env: Mapping[str, str] | None = None) -> str:
    try:
        done = subprocess.run(cmd, cwd=cwd, env=dict(env) if env else None, capture_output=True, text=True,
                              timeout=timeout, start_new_session=True, check=False)
    except subprocess.TimeoutExpired:
        raise HarnessError(f"{what} did not finish within {timeout:g} s: {' '.join(cmd)}") from None
    if done.returncode != 0:
        tail = " | ".join((done.stderr + done.stdout).strip().splitlines()[-8:])
        raise HarnessError(f"{what} exited with code {done.returncode}: {tail}")
    return done.stdout


@dataclass
class StopReport:
    graceful: bool  # everything exited after `torchserve --stop` within the deadline
    killed: list[int] = field(default_factory=list)  # what had to be SIGKILLed afterwards
    leftover: list[int] = field(default_factory=list)  # alive even after SIGKILL (should be empty)
    seconds: float = 0.0


@dataclass
class Response:
    status: int
    body: Any


class TorchServe:
    """One TorchServe instance on 127.0.0.1, owned by this process (a context manager)."""

    def __init__(self, workdir: Path, *, startup_timeout: float = 120.0, stop_timeout: float = 30.0) -> None:
        self.dir = Path(workdir)
        self.store = self.dir / "model_store"
        self.tmp = self.dir / "tmp"
        for folder in (self.store, self.tmp):
            folder.mkdir(parents=True, exist_ok=True)
        self.startup_timeout, self.stop_timeout = startup_timeout, stop_timeout
        self.lease = PortLease(5)  # held until stop(): TorchServe binds them only when it starts
        self.inference_port, self.management_port, self.metrics_port, grpc_a, grpc_b = self.lease.ports
        self.config = self.dir / "config.properties"
        self.config.write_text("\n".join([
            f"inference_address=http://127.0.0.1:{self.inference_port}",
            f"management_address=http://127.0.0.1:{self.management_port}",
            f"metrics_address=http://127.0.0.1:{self.metrics_port}",
            "grpc_inference_address=127.0.0.1", f"grpc_inference_port={grpc_a}",
            "grpc_management_address=127.0.0.1", f"grpc_management_port={grpc_b}",
            "default_workers_per_model=1",
            "disable_system_metrics=true",  # no periodic metric-collector processes
            "install_py_dep_per_model=false",
        ]) + "\n", encoding="utf-8")
        self.proc: subprocess.Popen[str] | None = None
        self.log = self.dir / "torchserve.out"
        self.pids: set[int] = set()
        self.keys: dict[str, str] = {}

    # ------------------------------------------------------------------ lifecycle

    @property
    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k != "TS_CONFIG_FILE"}  # it would override --ts-config
        env.update({"TMPDIR": str(self.tmp), "TEMP": str(self.tmp), "LOG_LOCATION": str(self.dir / "logs"),
                    "METRICS_LOCATION": str(self.dir / "logs"), "OMP_NUM_THREADS": env.get("OMP_NUM_THREADS", "1")})
        return env

    def start(self, models: Mapping[str, str]) -> None:
        """``torchserve --start --ncs --model-store STORE --models name=file.mar ...`` (foreground, own group)."""
        cmd = [SERVER, "--start", "--foreground", "--ncs", "--model-store", str(self.store),
               "--ts-config", str(self.config), "--models", *[f"{n}={f}" for n, f in models.items()]]
        with open(self.log, "w", encoding="utf-8") as out:
            self.proc = subprocess.Popen(cmd, cwd=self.dir, env=self.env, stdout=out, stderr=subprocess.STDOUT,
                                         text=True, start_new_session=True)
        self.pids.add(self.proc.pid)

    def wait_ready(self, models: Iterable[str]) -> float:
        """Until the token file exists, /ping says Healthy and every model has a READY worker."""
        started, names = time.monotonic(), list(models)
        deadline = started + self.startup_timeout
        while True:
            self._track()
            if self.proc is not None and self.proc.poll() is not None:
                raise HarnessError(f"torchserve exited with code {self.proc.returncode} while starting: {self.log_tail()}")
            if self._load_keys() and self._healthy() and all(self._ready(n) for n in names):
                return time.monotonic() - started
            if time.monotonic() > deadline:
                raise HarnessError(f"torchserve not ready within {self.startup_timeout:g} s (models {names}): {self.log_tail()}")
            time.sleep(0.25)

    def stop(self) -> StopReport:
        """``torchserve --stop``, wait for every process of the server to exit, kill any left."""
        try:
            return self._stop()
        finally:
            self.lease.release()  # the server's sockets are closed: the ports may go to others

    def _stop(self) -> StopReport:
        started = time.monotonic()
        self._track()
        if self.proc is None:
            return StopReport(graceful=True)
        try:
            _run([SERVER, "--stop"], cwd=self.dir, timeout=self.stop_timeout, what="torchserve --stop", env=self.env)
        except HarnessError:
            pass  # the kill below still runs; the report says it was not graceful
        graceful = self._wait_gone(self.stop_timeout)
        killed = [] if graceful else self._kill_all()
        if self.proc.poll() is None:
            self.proc.wait(timeout=self.stop_timeout)
        self._wait_gone(5.0)
        return StopReport(graceful, killed, self.alive(), time.monotonic() - started)

    def __enter__(self) -> TorchServe:
        return self

    def __exit__(self, *exc: object) -> None:
        self.last_stop = self.stop()

    # ------------------------------------------------------------------ processes

    def _track(self) -> None:
        """Remember every process in the server's group (the launcher, Java, the workers)."""
        if self.proc is None:
            return
        self.pids |= set(group_members(self.proc.pid))

    def alive(self) -> list[int]:
        return sorted(p for p in self.pids | set(group_members(self.proc.pid if self.proc else -1)) if is_alive(p))

    def _wait_gone(self, seconds: float) -> bool:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if self.proc is not None:
                self.proc.poll()  # reap the launcher, so it is not counted as a zombie
            if not self.alive():
                return True
            time.sleep(0.2)
        return not self.alive()

    def _kill_all(self) -> list[int]:
        victims = self.alive()
        if self.proc is not None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        for pid in victims:  # anything that left the group (setsid) but was tracked
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        return victims

    def log_tail(self, lines: int = 12) -> str:
        text = self.log.read_text(encoding="utf-8", errors="replace") if self.log.exists() else ""
        kept = [line for line in text.splitlines() if line.strip()][-lines:]
        return " | ".join(kept) or "(no output)"

    # ------------------------------------------------------------------ HTTP

    def _load_keys(self) -> bool:
        key_file = self.dir / "key_file.json"
        if not key_file.is_file():
            return False
        try:
            doc = json.loads(key_file.read_text(encoding="utf-8"))
            self.keys = {"inference": doc["inference"]["key"], "management": doc["management"]["key"]}
        except (ValueError, KeyError, TypeError):
            return False  # being written
        return True

    def _healthy(self) -> bool:
        r = self.request("GET", f"http://127.0.0.1:{self.inference_port}/ping", token="inference")
        return r.status == 200 and isinstance(r.body, dict) and r.body.get("status") == "Healthy"

    def _ready(self, name: str) -> bool:
        r = self.request("GET", f"http://127.0.0.1:{self.management_port}/models/{name}", token="management")
        if r.status != 200 or not isinstance(r.body, list) or not r.body:
            return False
        workers = r.body[0].get("workers", [])
        return bool(workers) and all(w.get("status") == "READY" for w in workers)

    def predict(self, model: str, payload: Any, *, token: str | None = "inference", timeout: float = 60.0) -> Response:
        return self.request("POST", f"http://127.0.0.1:{self.inference_port}/predictions/{model}",
                            body=payload, token=token, timeout=timeout)

    def request(self, method: str, url: str, *, body: Any = None, token: str | None = None, timeout: float = 10.0) -> Response:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(url, data=data, method=method)
        if data is not None:
            req.add_header("Content-Type", "application/json")
        if token is not None and token in self.keys:
            req.add_header("Authorization", f"Bearer {self.keys[token]}")
        try:
            with urllib.request.urlopen(req, timeout=timeout) as resp:
                return Response(resp.status, _decode(resp.read()))
        except urllib.error.HTTPError as err:
            return Response(err.code, _decode(err.read()))
        except (urllib.error.URLError, ConnectionError, TimeoutError) as err:
            return Response(0, f"{type(err).__name__}: {err}")


def _decode(raw: bytes) -> Any:
    try:
        return json.loads(raw)
    except ValueError:
        return raw.decode(errors="replace")


# ----------------------------------------------------------------------------- TF Serving


def tf_serving_unavailable(timeout: float = 15.0) -> str:
    """Why no TF Serving server can run here, in the tools' own words (empty when one can)."""
    server, docker = shutil.which("tensorflow_model_server"), shutil.which("docker")
    if server:
        return ""
    if docker is None:
        return ("no TF Serving server here: `tensorflow_model_server` is not on PATH and `docker` is not on PATH "
                "(TF Serving ships as a Docker image or an apt package, not on PyPI)")
    try:
        done = subprocess.run([docker, "info", "--format", "{{.ServerVersion}}"], capture_output=True, text=True,
                              timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        return ("no TF Serving server here: `tensorflow_model_server` is not on PATH and `docker info` did not answer "
                f"within {timeout:g} s")
    version = done.stdout.strip()
    if done.returncode == 0 and version and "error" not in version.lower():
        return ""
    said = [line.strip() for line in (done.stderr + done.stdout).splitlines() if line.strip()]
    return ("no TF Serving server here: `tensorflow_model_server` is not on PATH and the docker CLI reaches no engine: "
            f"`docker info` says {said[-1] if said else '(nothing)'!r}")
