"""torch.nn.LazyInstanceNorm1d/2d/3d: documented affine=False, track_running_stats=False; both default True.

Claim (dlconform modules.torch.module-contract, property train-eval): a module built with its
documented defaults behaves as documented; an instance norm without running statistics gives
bitwise the same output in train() and eval().
Documentation: help(torch.nn.LazyInstanceNorm2d) (1d and 3d alike),
https://docs.pytorch.org/docs/stable/generated/torch.nn.LazyInstanceNorm2d.html
    "affine: a boolean value that when set to ``True``, this module has learnable affine
     parameters ... Default: ``False``"
    "track_running_stats: a boolean value that when set to ``True``, this module tracks the running
     mean and variance, and when set to ``False``, this module does not track such statistics and
     always uses batch statistics in both training and eval modes. Default: ``False``"
  (the defaults of InstanceNorm1d/2d/3d, whose lazy versions these are).
Observed on torch 2.13.0+cpu: LazyInstanceNorm1d/2d/3d() have affine=True and
track_running_stats=True: the three classes define no __init__ and inherit
torch.nn.modules.batchnorm._LazyNormBase.__init__(eps=1e-5, momentum=0.1, affine=True,
track_running_stats=True, ...), the BatchNorm defaults (inspect.signature shows them). So a
default LazyInstanceNorm learns a weight and bias, and after one train() call its eval() output
uses the running statistics: it differs from the train() output (by 0.77 at the suite's input),
where the documented default always uses the instance's own statistics.
Found by: suites/modules/test_torch_module_records.py::test_torch_module_contract[cpu-LazyInstanceNorm2d-affine]
(built with affine=True and the documented default track_running_stats: property train-eval, max
abs difference 7.705e-01 between train() and eval() outputs).

Run: python torch_lazy_instancenorm_defaults.py
Exit 1 while the defaults differ from the documented ones, 0 once they agree (the code's or the
docstrings' fix), 2 if torch cannot be imported.
"""

import sys

import numpy as np

CLASSES = {"LazyInstanceNorm1d": (2, 3, 5), "LazyInstanceNorm2d": (2, 2, 3, 3), "LazyInstanceNorm3d": (1, 2, 2, 3, 3)}
DOCUMENTED = {"affine": False, "track_running_stats": False}


def _input(shape):
    return np.linspace(-1.5, 2.0, int(np.prod(shape))).reshape(shape) ** 2  # ordinary, not zero-mean


def observed():
    """Per class, built with no arguments: affine, track_running_stats, and
    max|train() output - eval() output| after one train() call."""
    import torch

    out = {}
    for name, shape in CLASSES.items():
        cls = getattr(torch.nn, name)
        m = cls().to(torch.float64)
        x = torch.tensor(_input(shape), dtype=torch.float64)
        with torch.no_grad():
            y_train = m.train()(x)
            y_eval = m.eval()(x)
        out[name] = {"affine": bool(m.affine), "track_running_stats": bool(m.track_running_stats),
                     "train_vs_eval": float((y_train - y_eval).abs().max())}
    return out


def expected():
    return {name: dict(DOCUMENTED) for name in CLASSES}


def judge(got, want):
    wrong = {name: {k: got[name][k] for k in DOCUMENTED} for name in want
             if any(got[name][k] != want[name][k] for k in DOCUMENTED)}
    seen = "; ".join(f"{name}(): affine={got[name]['affine']}, track_running_stats={got[name]['track_running_stats']}, "
                     f"max|train - eval| {got[name]['train_vs_eval']:.3g}" for name in want)
    line = (f"{seen}; documented defaults affine=False, track_running_stats=False (eval uses batch statistics: "
            f"train == eval); {len(wrong)} of {len(want)} classes differ")
    return not wrong, line


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
