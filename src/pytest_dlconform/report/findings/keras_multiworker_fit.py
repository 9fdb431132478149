"""Keras 3 model.fit under MultiWorkerMirroredStrategy fails on its first batch.

Claim (dlconform distributed.multiworker.keras-fit): fit under MultiWorkerMirroredStrategy
trains as single-device fit does on the same global batches.
Documentation: https://www.tensorflow.org/tutorials/distribute/multi_worker_with_keras
    "This tutorial demonstrates how to perform multi-worker distributed training with a
     Keras model and the Model.fit API using the tf.distribute.MultiWorkerMirroredStrategy
     API."
Observed on tensorflow 2.21.0, keras 3.15.1, two workers on one machine: ValueError:
Attempt to convert a value (PerReplica:{...}) with an unsupported type to a Tensor, from
strategy.reduce("MEAN", first_distributed_batch, axis=None) in
keras/src/backend/tensorflow/trainer.py, _maybe_symbolic_build().
Upstream: probably keras-team/keras#20585 "Does Keras 3 work with
tf.distribute.MultiWorkerMirroredStrategy?" (open; the TensorFlow tutorial's example fails
there since Keras 3 became TensorFlow's default Keras).
Found by: suites/distributed/test_keras_fit.py::test_fit_under_multiworker_equals_single_device_fit
(2 workers, global batch 4, dl_seed 0): the same model, data and optimizer inline below.

Run: python keras_multiworker_fit.py
It starts two worker processes (this file with --worker I) whose TensorFlow servers listen
on two free ports. TensorFlow's gRPC server listens on every interface, not only loopback:
run it where that is acceptable, or in a private network namespace with only loopback, e.g.
    unshare --user --map-root-user --net sh -c 'ip link set lo up && python keras_multiworker_fit.py'
Exit 1 while the bug is there, 0 once fixed, 2 if tensorflow/keras cannot be imported or
the workers did not finish within 300 s.
"""

import json
import os
import socket
import subprocess
import sys

import numpy as np

WORKERS, BATCH, LR = 2, 4, 0.1
rng = np.random.default_rng(0)  # the suite's _seeded_case(seed=0, batch=2 * 2, rows=4 * 2)
W1, B1 = rng.normal(size=(3, 4)) / np.sqrt(3), rng.normal(size=4) * 0.1
W2, B2 = rng.normal(size=(4, 2)) / np.sqrt(4), rng.normal(size=2) * 0.1
X, Y = rng.uniform(-1, 1, (8, 3)), rng.uniform(-1, 1, (8, 2))
RTOL = 1e-12  # two float64 SGD steps of a 3-4-2 network
TIMEOUT_S = 300


def worker(index, ports):
    """One worker: fit under MultiWorkerMirroredStrategy; prints its weights or its error as JSON."""
    os.environ["TF_CONFIG"] = json.dumps({"cluster": {"worker": [f"localhost:{p}" for p in ports]},
                                          "task": {"type": "worker", "index": index}})
    import keras
    import tensorflow as tf

    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    with strategy.scope():
        model = keras.Sequential([keras.Input((3,), dtype="float64"),
                                  keras.layers.Dense(4, activation="tanh", dtype="float64"),
                                  keras.layers.Dense(2, dtype="float64")])
        model.set_weights([W1, B1, W2, B2])
        model.compile(optimizer=keras.optimizers.SGD(LR), loss=keras.losses.MeanSquaredError(dtype="float64"))
    try:
        model.fit(X, Y, batch_size=BATCH, epochs=1, shuffle=False, verbose=0)
        out = {"weights": [w.tolist() for w in model.get_weights()]}
    except Exception as exc:
        out = {"error": f"{type(exc).__name__}: {(str(exc).strip().splitlines() or [''])[0][:300]}"}
    print("RESULT " + json.dumps(out), flush=True)
    os._exit(0)  # the collective runtime can keep a worker alive after its peer is gone


def _free_ports(n):
    socks = [socket.socket() for _ in range(n)]
    for s in socks:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


def observed():
    """Worker 0's weights after fit (or a RuntimeError carrying the error a worker raised)."""
    import tensorflow  # noqa: F401  (fail here with ImportError, not in the workers)

    ports = _free_ports(WORKERS)
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", "CUDA_VISIBLE_DEVICES": ""}
    procs = [subprocess.Popen([sys.executable, os.path.abspath(__file__), "--worker", str(i), json.dumps(ports)],
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env)
             for i in range(WORKERS)]
    results = []
    try:
        for p in procs:
            out, _ = p.communicate(timeout=TIMEOUT_S)
            lines = [ln for ln in out.splitlines() if ln.startswith("RESULT ")]
            results.append(json.loads(lines[-1][7:]) if lines else {"error": f"worker exited {p.returncode} without a result"})
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    errors = [r["error"] for r in results if "error" in r]
    if errors:
        raise RuntimeError(errors[0])
    return [np.asarray(w) for w in results[0]["weights"]]


def expected():
    """Single-device training in numpy: per global batch, the mean squared error over its
    rows, w -= lr * grad; x, y and lr rounded to float32 first, as Keras's fit does
    (float NumPy data becomes floatx; the learning rate is a float32 variable)."""
    xs, ys, lr = (np.asarray(a, np.float32).astype(np.float64) for a in (X, Y, LR))
    w1, b1, w2, b2 = W1.copy(), B1.copy(), W2.copy(), B2.copy()
    for lo in range(0, len(X), BATCH):
        x, y = xs[lo:lo + BATCH], ys[lo:lo + BATCH]
        h = np.tanh(x @ w1 + b1)
        dp = 2.0 * (h @ w2 + b2 - y) / (y.shape[1] * len(x))
        dz = (dp @ w2.T) * (1.0 - h ** 2)
        w2, b2, w1, b1 = w2 - lr * h.T @ dp, b2 - lr * dp.sum(0), w1 - lr * x.T @ dz, b1 - lr * dz.sum(0)
    return [w1, b1, w2, b2]


def judge(got, want):
    if isinstance(got, BaseException):
        return False, f"model.fit under MultiWorkerMirroredStrategy ({WORKERS} workers, global batch {BATCH}) raised {got}"
    err = max(float(np.max(np.abs(g - w)) / max(np.max(np.abs(w)), 1e-300)) for g, w in zip(got, want))
    return err <= RTOL, (f"model.fit under MultiWorkerMirroredStrategy ({WORKERS} workers, global batch {BATCH}): weights "
                         f"vs single-device training in numpy: worst relative error {err:.3g} (allowed {RTOL:g})")


def main(observe=observed):
    try:
        got = observe()
    except ImportError as exc:
        print(f"CANNOT RUN: {exc}")
        return 2
    except subprocess.TimeoutExpired:
        print(f"CANNOT RUN: the workers did not finish within {TIMEOUT_S} s")
        return 2
    except RuntimeError as exc:  # a worker's fit raised: the symptom
        got = exc
    holds, line = judge(got, expected())
    print(("FIXED: " if holds else "BUG PRESENT: ") + line)
    return 0 if holds else 1


if __name__ == "__main__":
    if sys.argv[1:2] == ["--worker"]:
        worker(int(sys.argv[2]), json.loads(sys.argv[3]))
    sys.exit(main())
