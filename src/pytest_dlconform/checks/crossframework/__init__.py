"""The same model in TensorFlow (Keras) and torch: one architecture, one set of weights.

An :class:`Architecture` is plain data (dense, conv, layer/batch normalisation, flatten,
a final dense layer giving logits, softmax cross-entropy), so the same model can be built
as a Keras model (any Keras backend), as a ``torch.nn.Module``, and evaluated by a float64
numpy reference that shares no code with either framework. Weights live in Keras's layout
(dense kernel ``(in, out)``, conv kernel ``(kh, kw, in, out)``, channels last); the torch
builder transfers them the way a person porting a model must: transposed kernels, NCHW
inside, Keras's ``H, W, C`` flatten order, ``momentum_torch = 1 - momentum_keras``.

Results of a run are flat dicts of float64 arrays: ``logits``, ``loss``, ``grad/x``,
``grad/<i>.<weight>`` and ``state/<i>.moving_mean|moving_variance``; :func:`compare` checks
two of them with tolerances from the dtype and the model (:func:`tolerances`).

One room per role, one direction (each module imports only those above it):

- :mod:`.architectures`: the data (:class:`Architecture`, :class:`Case`, :data:`Result`).
- :mod:`.generation`: generated cases (hypothesis strategy, seeded coverage batches).
- :mod:`.reference`: the float64 numpy reference and the case's conditioning.
- :mod:`.magnitudes`: the backward pass on magnitudes (each gradient tensor's scale).
- :mod:`.tolerances`: the error model and :func:`compare` (gradients per named tensor).
- :mod:`.keras_models`, :mod:`.torch_models`: the builders and runs per framework.
- :mod:`.oracles`: the claims' checks (:func:`check_same_model`, :func:`check_backend`, ...).
- :mod:`.keras_backends`: Keras on each backend in fresh interpreters
  (built on :func:`pytest_dlconform.frameworks.fresh.call`).

Nothing here imports a framework at module import time. Suites use it as
``from pytest_dlconform.checks import crossframework as cf``; every name they use is
re-exported here.
"""

from __future__ import annotations

from ..numerics import Tolerance
from .architectures import (
    ACTIVATIONS,
    DTYPES,
    EPSILONS,
    MOMENTA,
    NORMS,
    Architecture,
    Case,
    Layer,
    Loss,
    Result,
    activations_for,
    conv_output,
    framework_devices,
    shapes,
    to_float64,
    weight_shapes,
)
from .generation import Chooser, ForcingChooser, HypothesisChooser, RandomChooser, case_modes, cases, coverage_batch, draw_case
from .keras_backends import (
    JAX_INSTALL,
    KERAS_RUNS,
    WORKER,
    backend_facts,
    keras_backend_call,
    keras_backend_worker,
    keras_run_device_reason,
    keras_run_env,
    keras_run_missing,
    keras_run_problem,
    read_batch,
    read_meta,
    read_results,
    write_batch,
)
from .keras_models import keras_in_process, keras_loss, keras_model, keras_state, keras_trainables, tf_run
from .magnitudes import gradient_magnitudes
from .oracles import (
    ACTIVATION_FORMULAS,
    activation_reference,
    check_activation,
    check_backend,
    check_backends,
    check_devices,
    check_same_model,
    framework_activation,
    grad_scales,
)
from .reference import Reference, reference, reference_loss, rounded
from .reference import _conv as _conv  # used by the meta-tests
from .tolerances import LOOSE_NOTE, UNJUDGED_RTOL, ModelMismatch, compare, tf32_in_use, tolerances
from .torch_models import _MODULE_CLASS as _MODULE_CLASS  # the meta-tests plant a wrong port in it
from .torch_models import _module_class as _module_class
from .torch_models import torch_loss, torch_model, torch_run, torch_trainables

__all__ = [
    "ACTIVATIONS",
    "ACTIVATION_FORMULAS",
    "DTYPES",
    "EPSILONS",
    "JAX_INSTALL",
    "KERAS_RUNS",
    "LOOSE_NOTE",
    "MOMENTA",
    "NORMS",
    "UNJUDGED_RTOL",
    "WORKER",
    "Architecture",
    "Case",
    "Chooser",
    "ForcingChooser",
    "HypothesisChooser",
    "Layer",
    "Loss",
    "ModelMismatch",
    "RandomChooser",
    "Reference",
    "Result",
    "Tolerance",
    "activation_reference",
    "activations_for",
    "backend_facts",
    "case_modes",
    "cases",
    "check_activation",
    "check_backend",
    "check_backends",
    "check_devices",
    "check_same_model",
    "compare",
    "conv_output",
    "coverage_batch",
    "draw_case",
    "framework_activation",
    "framework_devices",
    "grad_scales",
    "gradient_magnitudes",
    "keras_backend_call",
    "keras_backend_worker",
    "keras_in_process",
    "keras_loss",
    "keras_model",
    "keras_run_device_reason",
    "keras_run_env",
    "keras_run_missing",
    "keras_run_problem",
    "keras_state",
    "keras_trainables",
    "read_batch",
    "read_meta",
    "read_results",
    "reference",
    "reference_loss",
    "rounded",
    "shapes",
    "tf32_in_use",
    "tf_run",
    "to_float64",
    "tolerances",
    "torch_loss",
    "torch_model",
    "torch_run",
    "torch_trainables",
    "weight_shapes",
    "write_batch",
]
