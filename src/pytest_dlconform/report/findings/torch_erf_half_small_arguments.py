"""torch.erf in bfloat16 and float16 on CPU has an absolute, not a relative, error near 0.

Claim (dlconform autodiff.gradient.low-precision): float16 and bfloat16 forward values agree
with the float64 reference within the dtype's rounding.
Documentation: https://pytorch.org/docs/stable/generated/torch.special.erf.html
  erf(x) = 2/sqrt(pi) * integral_0^x exp(-t^2) dt; float16 and bfloat16 are supported dtypes.
  Near 0, erf(x) = 2x/sqrt(pi) (1 - x^2/3 + ...), a value every dtype represents to its
  relative rounding (2^-8 bfloat16, 2^-11 float16).
Observed on torch 2.13.0+cpu: erf of a bfloat16 or float16 tensor returns 0 for 0 < |x| < ~1.8e-7
and errs by about 6e-8 absolutely below ~1e-3 (erf(1e-6) = 1.192e-6 for 1.128e-6, 5.6%); float32
and float64 are accurate. The error is the absolute 1.5e-7 bound of the Abramowitz-Stegun 7.1.26
approximation 1 - p(t) exp(-x^2) that Vectorized<float>::erf uses, which the reduced-precision
CPU kernel calls after widening to float32.
Upstream: pytorch/pytorch#198183 (open) reports the same approximation under torch.compile for
float32 ("returns 0 for |x| <= 1e-7, 1.7e-2 relative error at 1e-5"); it does not mention eager
bfloat16/float16, which take the same vectorised path.
Found by: suites/autodiff/test_low_precision.py::test_low_precision_forward_and_gradient_match_float64
[torch-cpu-erf-bfloat16] under --dl-profile=explore --hypothesis-seed=20261201 (x = 2.07e-16).

Run: python torch_erf_half_small_arguments.py
Exit 1 while the bug is there, 0 once fixed, 2 if torch cannot be imported.
"""

import math
import sys

X = [2.07294329e-16, 1e-10, 1e-7, 1e-6, 1e-5]
DTYPES = ("bfloat16", "float16")
# The result rounded to the dtype: half a unit of its 8 (bfloat16) or 11 (float16) significant bits.
U = {"bfloat16": 2.0**-8, "float16": 2.0**-11}


def observed():
    """dtype -> (inputs as the dtype holds them, erf computed in that dtype), both float64."""
    import torch

    out = {}
    for name in DTYPES:
        x = torch.tensor(X, dtype=getattr(torch, name))
        out[name] = (x.double().tolist(), torch.erf(x).double().tolist())
    return out


def expected():
    return None  # computed from each dtype's own inputs in judge


def judge(got, want=None):
    worst = (0.0, None)
    for name, (xs, ys) in got.items():
        for x, y in zip(xs, ys):
            ref = math.erf(x)
            rel = abs(y - ref) / abs(ref) if ref else abs(y)
            if rel / U[name] > worst[0]:
                worst = (rel / U[name], (name, x, y, ref, rel))
    ratio, case = worst
    if case is None:
        return True, "erf is exact at every input"
    name, x, y, ref, rel = case
    line = (f"worst: torch.erf({x:.4g}) in {name} = {y:.6g}, documented {ref:.6g}: relative error {rel:.3g}, "
            f"{ratio:.3g}x the dtype's rounding {U[name]:.3g}")
    return ratio <= 1.0, line


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
