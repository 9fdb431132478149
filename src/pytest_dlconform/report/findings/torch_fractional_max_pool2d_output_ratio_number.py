"""torch.nn.functional.fractional_max_pool2d: output_ratio given as a number raises TypeError.

Claim (dlconform modules.torch.functional): every torch.nn.functional function accepts the arguments
its docstring documents and computes what it states; fractional_max_pool2d's output_ratio may be a
number r, meaning (r, r).
Documentation: help(torch.nn.functional.fractional_max_pool2d),
https://docs.pytorch.org/docs/stable/generated/torch.nn.functional.fractional_max_pool2d.html
    "output_ratio: If one wants to have an output size as a ratio of the input size, this option can
     be given. This has to be a number or tuple in the range (0, 1)"
  (the same words as fractional_max_pool3d's, and as nn.FractionalMaxPool2d's, which both accept
  output_ratio=0.5).
Observed on torch 2.13.0+cpu: F.fractional_max_pool2d(x, 2, output_ratio=0.5) raises
"TypeError: object of type 'float' has no len()", with return_indices=False or True and through
F.fractional_max_pool2d_with_indices alike; output_ratio=(0.5, 0.5) works. torch/nn/functional.py
fractional_max_pool2d_with_indices checks `if len(output_ratio) > 2: raise ValueError(...
"requires output_ratio to either be a single Int or tuple of Ints.")` before `_pair(output_ratio)`,
so a number fails on len(); fractional_max_pool3d_with_indices has no such check and calls
`_triple(output_ratio)` directly. nn.FractionalMaxPool2d works because its __init__ already applies
_pair to output_ratio.
Found by: suites/modules/test_torch_functional.py::test_record[*-fractional_max_pool2d] (output_ratio=0.5
against (0.5, 0.5) with the same _random_samples: TypeError: object of type 'float' has no len()).

Run: python torch_fractional_max_pool2d_output_ratio_number.py
Exit 1 while a number output_ratio raises (or differs from (r, r)), 0 once it pools as (r, r), 2 if
torch cannot be imported.
"""

import sys

import numpy as np

SHAPE = (1, 2, 8, 6)  # (N, C, H, W); output_ratio 0.5 gives a 4 x 3 output
KERNEL, RATIO = 2, 0.5
# each label: (function name, keyword arguments besides output_ratio); the tuple form is the control
CALLS = {
    "F.fractional_max_pool2d(x, 2, output_ratio=0.5)": ("fractional_max_pool2d", {}),
    "F.fractional_max_pool2d(x, 2, output_ratio=0.5, return_indices=True)": ("fractional_max_pool2d",
                                                                            {"return_indices": True}),
    "F.fractional_max_pool2d_with_indices(x, 2, output_ratio=0.5)": ("fractional_max_pool2d_with_indices", {}),
}
CONTROL = "F.fractional_max_pool2d(x, 2, output_ratio=(0.5, 0.5))"


def observed():
    """Per call with the number 0.5 (and the tuple control): the output shape and whether the
    values (and indices) equal the tuple (0.5, 0.5) call's with the same _random_samples, or the
    exception raised as 'Type: message'."""
    import torch
    import torch.nn.functional as F

    x = torch.tensor(np.random.default_rng(0).standard_normal(SHAPE), dtype=torch.float64)
    samples = torch.tensor(np.random.default_rng(1).uniform(size=(SHAPE[0], SHAPE[1], 2)), dtype=torch.float64)
    ref_v, ref_i = F.fractional_max_pool2d(x, KERNEL, output_ratio=(RATIO, RATIO), return_indices=True,
                                           _random_samples=samples)
    out = {CONTROL: (tuple(ref_v.shape), True)}
    for label, (name, kwargs) in CALLS.items():
        try:
            res = getattr(F, name)(x, KERNEL, output_ratio=RATIO, _random_samples=samples, **kwargs)
        except Exception as exc:  # the finding: a documented argument refused
            out[label] = f"{type(exc).__name__}: {exc}"
            continue
        v, i = res if isinstance(res, tuple) else (res, None)
        same = tuple(v.shape) == tuple(ref_v.shape) and bool(torch.equal(v, ref_v))
        if i is not None:
            same = same and bool(torch.equal(i, ref_i))
        out[label] = (tuple(v.shape), same)
    return out


def expected():
    """Documented: a number r is the ratio (r, r): output floor(H r) x floor(W r), the same pooling
    (values and indices) as output_ratio=(r, r) with the same _random_samples."""
    shape = (SHAPE[0], SHAPE[1], int(SHAPE[2] * RATIO), int(SHAPE[3] * RATIO))
    return dict.fromkeys((CONTROL, *CALLS), (shape, True))


def _show(v):
    return v if isinstance(v, str) else f"output {v[0]}{', same as (0.5, 0.5)' if v[1] else ', differs from (0.5, 0.5)'}"


def judge(got, want):
    def holds(v, w):
        return not isinstance(v, str) and (tuple(v[0]), bool(v[1])) == w

    wrong = [label for label in want if label not in got or not holds(got[label], want[label])]
    shown = [label for label in wrong if label != CONTROL] or list(CALLS)
    seen = "; ".join(f"{label}: {_show(got.get(label, 'not run'))}" for label in shown)
    line = (f"{seen} (control {CONTROL}: {_show(got.get(CONTROL, 'not run'))}); documented: output_ratio "
            f"'has to be a number or tuple in the range (0, 1)', a number r pooling as (r, r) to "
            f"{want[CONTROL][0]}; {len(wrong)} of {len(want)} calls differ")
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
