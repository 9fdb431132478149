"""TensorFlow adapter. TensorFlow is imported on first use of :attr:`module`, never before."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ..core.versions import framework_version
from .base import HarnessError, TensorFn

_DEVICE_KINDS = {"cpu": "CPU", "gpu": "GPU", "multi-gpu": "GPU"}


class TensorFlowAdapter:
    name = "tensorflow"
    short = "tf"
    # Logical GPUs to split a single visible GPU into (set by the run, devices.logical_gpus).
    logical_gpus = 1
    LOGICAL_GPU_MB = 2048  # per logical GPU: the suites' models and batches need megabytes

    def __init__(self) -> None:
        self._tf: Any = None
        self._threads: int | None = None
        self._logical_cpus = 1
        self.configured: dict[str, Any] = {}

    def version(self) -> str:
        return framework_version("tensorflow") or "not installed"

    def configure(self, *, threads: int | None, logical_cpus: int) -> None:
        """Remember the settings; apply them now if TensorFlow is already imported.

        Logical devices and thread pools can only be set before TensorFlow's runtime
        initialises (its first op or device query), so the plugin calls this after
        collection, before any test can run an op.
        """
        self._threads, self._logical_cpus = threads, max(1, logical_cpus)
        if threads:
            os.environ.setdefault("TF_NUM_INTRAOP_THREADS", str(threads))
            os.environ.setdefault("TF_NUM_INTEROP_THREADS", str(max(1, min(2, threads))))
        if "tensorflow" in sys.modules:
            self._apply(sys.modules["tensorflow"])

    @property
    def module(self) -> Any:
        if self._tf is None:
            os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
            import tensorflow as tf

            self._apply(tf)
        return self._tf

    def _apply(self, tf: Any) -> None:
        if self._tf is not None:
            return
        self._tf = tf
        try:
            if self._threads:
                tf.config.threading.set_intra_op_parallelism_threads(self._threads)
                tf.config.threading.set_inter_op_parallelism_threads(max(1, min(2, self._threads)))
            cpu = tf.config.list_physical_devices("CPU")[0]
            if self._logical_cpus > 1:
                tf.config.set_logical_device_configuration(
                    cpu, [tf.config.LogicalDeviceConfiguration() for _ in range(self._logical_cpus)]
                )
            gpus = tf.config.list_physical_devices("GPU")
            if self.logical_gpus > 1 and len(gpus) == 1:
                # TensorFlow's way to run multi-GPU code on one GPU; memory growth and
                # logical devices exclude each other, so each gets a fixed share instead.
                tf.config.set_logical_device_configuration(gpus[0], [
                    tf.config.LogicalDeviceConfiguration(memory_limit=self.LOGICAL_GPU_MB)
                    for _ in range(self.logical_gpus)])
            else:
                for gpu in gpus:
                    tf.config.experimental.set_memory_growth(gpu, True)
        except RuntimeError as exc:
            raise HarnessError(
                "TensorFlow was initialised before dlconform could configure its logical devices and "
                f"threads ({exc}); a suite module must not run TensorFlow ops at import time"
            ) from exc
        self.configured = {
            "logical_cpus": len(tf.config.list_logical_devices("CPU")),
            "gpus": len(tf.config.list_logical_devices("GPU")),
            "intra_op_threads": tf.config.threading.get_intra_op_parallelism_threads(),
        }

    def device(self, kind: str, index: int = 0) -> str:
        tf = self.module
        physical = _DEVICE_KINDS[kind]
        found = tf.config.list_logical_devices(physical)
        if len(found) <= index:
            raise HarnessError(
                f"tensorflow {self.version()} sees {len(found)} {physical} device(s), the test needs "
                f"{physical}:{index}; on a GPU machine install a CUDA build (pip install 'tensorflow[and-cuda]')"
            )
        return f"/{physical}:{index}"

    def dtype(self, name: str) -> Any:
        return getattr(self.module, name)

    def tensor(self, array: np.ndarray, dtype: str = "float64", device: str = "cpu") -> Any:
        tf = self.module
        with tf.device(self.device(device)):
            return tf.identity(tf.constant(np.asarray(array), dtype=self.dtype(dtype)))

    def numpy(self, tensor: Any) -> np.ndarray:
        return np.asarray(tensor.numpy())

    def call(self, fn: TensorFn, xs: Sequence[np.ndarray], dtype: str, device: str) -> np.ndarray:
        tf = self.module
        with tf.device(self.device(device)):
            return self.numpy(fn([self.tensor(x, dtype, device) for x in xs]))

    def vjp(self, fn: TensorFn, xs: Sequence[np.ndarray], w: np.ndarray, dtype: str, device: str) -> list[np.ndarray]:
        tf = self.module
        with tf.device(self.device(device)):
            inputs = [self.tensor(x, dtype, device) for x in xs]
            with tf.GradientTape() as tape:
                tape.watch(inputs)
                out = fn(inputs)
            grads = tape.gradient(
                out, inputs, output_gradients=self.tensor(w, dtype, device),
                unconnected_gradients=tf.UnconnectedGradients.ZERO,
            )
        # The gradient of a gather is a tf.IndexedSlices (sparse rows), documented for
        # GradientTape.gradient: densify it, as a user does, before comparing values.
        return [self.numpy(tf.convert_to_tensor(g)) for g in grads]

    def jvp(self, fn: TensorFn, xs: Sequence[np.ndarray], us: Sequence[np.ndarray], dtype: str, device: str) -> np.ndarray:
        tf = self.module
        with tf.device(self.device(device)):
            inputs = [self.tensor(x, dtype, device) for x in xs]
            tangents = [self.tensor(u, dtype, device) for u in us]
            with tf.autodiff.ForwardAccumulator(inputs, tangents) as acc:
                out = fn(inputs)
            ju = acc.jvp(out, unconnected_gradients=tf.UnconnectedGradients.ZERO)
        return self.numpy(ju)

    def seed(self, value: int) -> None:
        self.module.random.set_seed(value)

    def snapshot(self) -> Mapping[str, Any]:
        if self._tf is None and "tensorflow" not in sys.modules:
            return {}
        tf = self.module
        state: dict[str, Any] = {
            "tf.config.functions_run_eagerly": tf.config.functions_run_eagerly(),
            "tf.config.get_soft_device_placement": tf.config.get_soft_device_placement(),
        }
        keras = sys.modules.get("keras")
        if keras is not None and hasattr(keras, "mixed_precision"):
            state["keras.mixed_precision.global_policy"] = keras.mixed_precision.global_policy().name
            state["keras.config.floatx"] = keras.config.floatx()
        return state

    def restore(self, state: Mapping[str, Any]) -> None:
        if not state:
            return
        tf = self.module
        tf.config.run_functions_eagerly(state["tf.config.functions_run_eagerly"])
        tf.config.set_soft_device_placement(state["tf.config.get_soft_device_placement"])
        keras = sys.modules.get("keras")
        if keras is not None and "keras.mixed_precision.global_policy" in state:
            keras.mixed_precision.set_global_policy(state["keras.mixed_precision.global_policy"])
            keras.config.set_floatx(state["keras.config.floatx"])
