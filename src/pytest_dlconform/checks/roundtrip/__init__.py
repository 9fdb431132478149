"""Round trips through saved artifacts: export, load back (here and in a fresh interpreter), compare.

One room per role, one direction (each module imports only those above it):

- :mod:`.errors`: :class:`ArtifactError` (the helper failed: a harness error) and
  :class:`RoundTripMismatch` with its kinds (what came back differs: a conformance result).
- :mod:`.artifacts`: sealed artifacts. :func:`export_artifact` stages, seals and renames
  into place; :func:`open_artifact` refuses anything without a matching seal.
- :mod:`.models`: :class:`ModelSpec` (a small layer stack with parameters from its seed),
  its float64 numpy reference and the tolerances derived from it.
- :mod:`.zoo`: coverage models: every layer kind and activation (non-default parameters)
  in three small specs, by construction, and the claims' mode names of a spec.
- :mod:`.builders`: the spec as a torch module (:mod:`.torch_layers`: the permutations and
  recurrent wrappers torch.nn lacks), a Keras model, a servable ``tf.Module``.
- :mod:`.loaders`: one loader per format (:data:`FORMATS`), the same code here and in a
  fresh interpreter: outputs, named state, signature.
- :mod:`.oracles`: :func:`assert_same_outputs` (bitwise), :func:`assert_close_outputs`
  (a dtype-derived tolerance), :func:`assert_within_bound` (a computed quantisation
  bound), :func:`assert_int8_weights`, :func:`assert_same_state`, :func:`assert_same_signature`.
- :mod:`.fresh_batch`: loading a batch of artifacts in one fresh interpreter
  (built on :func:`pytest_dlconform.frameworks.fresh.call`).
- :mod:`.runner`: :class:`RoundTrip`, what a suite drives: export, check here, check fresh.

Suites use it as ``from pytest_dlconform.checks import roundtrip as rt``; every name they
use is re-exported here.
"""

from __future__ import annotations

from .artifacts import FORMATS, MAIN_FILE, SEAL, Artifact, export_artifact, open_artifact, reseal
from .builders import build_keras, build_torch, servable_module
from .errors import (
    ArtifactError,
    LoadFailed,
    NotQuantised,
    OutputMismatch,
    QuantisationBoundExceeded,
    QuantisedWeightsMismatch,
    RoundTripMismatch,
    SignatureMismatch,
    StateMismatch,
    WriteFailed,
)
from .fresh_batch import FRESH_MAIN, FreshBatch, FreshResult, fresh_main
from .fresh_batch import _key as _key  # used by checks.usermodel
from .fresh_batch import _unkey as _unkey  # used by suites/model/test_export.py
from .loaders import (
    SEED_STATE,
    Int8Tensor,
    Loaded,
    export_signature,
    keras_rng_state,
    keras_signature,
    keras_state,
    load,
    tf_signature,
    tf_signatures,
    torch_call,
    torch_device,
    torch_state,
    torch_state_from,
    torchscript_signature,
)
from .models import (
    ACTIVATIONS,
    KERAS_BN_EPS,
    KERAS_LN_EPS,
    TORCH_BN_EPS,
    TORCH_LN_EPS,
    Layer,
    ModelSpec,
    example_inputs,
    examples,
    forward_magnitude,
    magnitudes,
    model_specs,
    model_tolerance,
    numpy_forward,
    parameters,
)
from .models import _activation as _activation  # used by checks.tfjs and the unit tests
from .oracles import (
    DYNAMIC,
    assert_close_outputs,
    assert_int8_weights,
    assert_same_outputs,
    assert_same_signature,
    assert_same_state,
    assert_within_bound,
    dynamic_range_bound,
)
from .runner import Expected, RoundTrip, check_loaded

__all__ = [
    "ACTIVATIONS", "DYNAMIC", "FORMATS", "FRESH_MAIN", "KERAS_BN_EPS", "KERAS_LN_EPS", "MAIN_FILE", "SEAL", "SEED_STATE",
    "TORCH_BN_EPS", "TORCH_LN_EPS",
    "Artifact", "ArtifactError", "Expected", "FreshBatch", "FreshResult", "Int8Tensor", "Layer", "LoadFailed", "Loaded",
    "ModelSpec", "NotQuantised", "OutputMismatch", "QuantisationBoundExceeded", "QuantisedWeightsMismatch", "RoundTrip",
    "RoundTripMismatch", "SignatureMismatch", "StateMismatch", "WriteFailed",
    "assert_close_outputs", "assert_int8_weights", "assert_same_outputs", "assert_same_signature", "assert_same_state",
    "assert_within_bound", "build_keras", "build_torch", "check_loaded", "dynamic_range_bound", "example_inputs",
    "examples", "export_artifact", "export_signature", "forward_magnitude", "fresh_main", "keras_rng_state",
    "keras_signature", "keras_state", "load", "magnitudes", "model_specs", "model_tolerance", "numpy_forward",
    "open_artifact", "parameters", "reseal", "servable_module", "tf_signature", "tf_signatures", "torch_call",
    "torch_device", "torch_state", "torch_state_from", "torchscript_signature",
]
