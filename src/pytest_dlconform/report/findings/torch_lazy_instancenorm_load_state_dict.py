"""torch.nn.LazyInstanceNorm1d/2d/3d: after loading an initialised state_dict, forward raises (num_features 0).

Claim (dlconform modules.torch.module-contract, property state_dict-roundtrip): a fresh module
that loads an initialised module's state_dict (strict=True) gives the same eval output.
Documentation: help(torch.nn.modules.lazy.LazyModuleMixin),
https://docs.pytorch.org/docs/stable/generated/torch.nn.modules.lazy.LazyModuleMixin.html
    "Lazy modules can load regular :class:`torch.nn.Parameter` s (i.e. you can serialize/deserialize
     initialized LazyModules and they will remain initialized)"; "Note, however, that the loaded
     parameters will not be replaced when doing a "dry run" if they are initialized when the state
     is loaded."
  and help(torch.nn.LazyInstanceNorm1d): "The ``num_features`` argument of the
  :class:`InstanceNorm1d` is inferred from the ``input.size(1)``", input (N, C, L) or (C, L).
  So a LazyInstanceNorm that loaded an initialised state runs on inputs of that state's C
  channels, with the loaded weight and bias.
Observed on torch 2.13.0+cpu: with affine=True the first forward after load_state_dict raises
ValueError: expected input's size at dim=1 to match num_features (0), but got: C. The load hook
(LazyModuleMixin._lazy_load_hook) materialises the weight, bias and running statistics to the
loaded shapes, so at the first forward has_uninitialized_params() is False and
_LazyNormBase.initialize_parameters, the only place that sets num_features from the input, does
nothing; _infer_parameters then turns the module into InstanceNorm1d/2d/3d with num_features=0, and
_InstanceNorm.forward refuses every input whose channel count differs from num_features when
affine is True. (LazyBatchNorm keeps num_features=0 too, but BatchNorm's forward does not check it.)
Known upstream: pytorch/pytorch#73009 (open, 2022: lazy modules should finish initialising on
load_state_dict), fix PRs #150593 and #184698 (both closed without landing).
Found by: suites/modules/test_torch_module_records.py::test_torch_module_contract[cpu-LazyInstanceNorm1d-affine,running-stats]
and [cpu-LazyInstanceNorm3d-affine,no-running-stats] (property state_dict-roundtrip).

Run: python torch_lazy_instancenorm_load_state_dict.py
Exit 1 while a loaded LazyInstanceNorm cannot run (or gives another output), 0 once every one
gives the original module's output, 2 if torch cannot be imported.
"""

import sys

import numpy as np

# (class, constructor options, input shape): affine=True in each; track_running_stats both ways
CASES = [
    ("LazyInstanceNorm1d", {"affine": True, "track_running_stats": True}, (2, 3, 5)),
    ("LazyInstanceNorm2d", {"affine": True, "track_running_stats": False}, (2, 2, 3, 3)),
    ("LazyInstanceNorm3d", {"affine": True, "track_running_stats": False}, (1, 2, 2, 3, 3)),
]


def _input(shape):
    return np.linspace(-1.5, 2.0, int(np.prod(shape))).reshape(shape) ** 2


def observed():
    """Per case: the initialised module's eval output, and what a fresh module of the same class
    does after load_state_dict(state, strict=True): its eval output, or the exception it raised."""
    import torch

    out = {}
    for name, kwargs, shape in CASES:
        cls = getattr(torch.nn, name)
        x = torch.tensor(_input(shape), dtype=torch.float64)
        torch.manual_seed(0)
        a = cls(**kwargs, dtype=torch.float64)
        with torch.no_grad():
            a(x)  # the dry run: initialised, now an InstanceNorm*d
            a.weight.uniform_(0.5, 1.5)  # non-default parameters, so loading them shows
            a.bias.uniform_(-0.5, 0.5)
            want = a.eval()(x).numpy().copy()
        b = cls(**kwargs, dtype=torch.float64)
        b.load_state_dict(a.state_dict(), strict=True)
        case = {"want": want, "after_load": f"{type(b).__name__}, num_features={b.num_features}"}
        try:
            with torch.no_grad():
                case["got"] = b.eval()(x).numpy().copy()
        except Exception as exc:  # the symptom is the exception
            case["raised"] = f"{type(exc).__name__}: {exc}"
        out[f"{name}({', '.join(f'{k}={v}' for k, v in kwargs.items())})"] = case
    return out


def expected():
    return None  # each loaded module's eval output must equal the original's, observed()[...]["want"]


def judge(got, want=None):
    bad, seen = 0, []
    for name, case in got.items():
        if "raised" in case:
            bad += 1
            seen.append(f"{name} after load_state_dict ({case['after_load']}): forward raised {case['raised']}")
            continue
        diff = float(np.max(np.abs(np.asarray(case["got"]) - np.asarray(case["want"]))))
        bad += diff != 0.0
        seen.append(f"{name} after load_state_dict: max|output - original's| {diff:.3g}")
    line = "; ".join(seen) + f" (documented: loaded lazy modules remain initialized); {bad} of {len(got)} fail"
    return bad == 0, line


def main(observe=observed):
    try:
        got = observe()
    except ImportError as exc:
        print(f"CANNOT RUN: {exc}")
        return 2
    holds, line = judge(got, expected())
    print(("FIXED: " if holds else "BUG PRESENT: ") + line)
    return 0 if holds else 1


if __name__ == "__main__":
    sys.exit(main())
