"""torch.compile (inductor, CPU) cannot differentiate a convolution of a replicate-padded input.

Claim (dlconform execution.compile.backward): gradients of a torch.compile'd function equal
eager gradients, for the documented ops and modes.
Documentation: https://pytorch.org/docs/stable/generated/torch.compile.html (inductor is the
default backend; compiled functions support autograd), torch.nn.functional.pad (mode
'replicate') and torch.nn.functional.conv2d; both differentiate in eager and under aot_eager.
Observed on torch 2.13.0+cpu: the backward of torch.compile(f) with
f(x, w) = conv2d(pad(x, (1, 1, 1, 1), mode='replicate'), w), x of shape (2, 2, 4, 4), raises
  AssertionError: expected size 2==2, stride 1==16 at dim=1; expected size 4==4, stride 8==4 at
  dim=2; expected size 4==4, stride 2==1 at dim=3 / Error in op:
  torch.ops.aten.replication_pad2d_backward.default
("This error most often comes from a incorrect fake (aka meta) kernel"): inductor hands
replication_pad2d_backward a channels-last gradient where its kernel's strides are contiguous.
Upstream: no report found (searched 2026-12-01: "inductor replication_pad2d_backward stride").
Found by: suites/execution/test_compiled_backward.py::test_torch_inductor_backward_matches_eager
[cpu-conv2d_full] (padding_mode='replicate') under the explore profile, seed 20261201.

Run: python torch_inductor_replication_pad_backward.py
Exit 1 while the bug is there, 0 once fixed, 2 if torch cannot be imported.
"""

import sys


def observed():
    """(eager input gradient, compiled input gradient or the exception it raised), as lists."""
    import torch
    import torch.nn.functional as F

    def f(x, w):
        return F.conv2d(F.pad(x, (1, 1, 1, 1), mode="replicate"), w)

    gen = torch.Generator().manual_seed(0)
    x = torch.randn(2, 2, 4, 4, generator=gen, requires_grad=True)
    w = torch.randn(3, 2, 3, 3, generator=gen)
    (eager,) = torch.autograd.grad(f(x, w).sum(), x)
    try:
        (compiled,) = torch.autograd.grad(torch.compile(f, backend="inductor")(x, w).sum(), x)
    except AssertionError as exc:  # the symptom
        return eager.tolist(), exc
    return eager.tolist(), compiled.tolist()


def expected():
    return None  # the eager gradient, in the observation


def judge(got, want=None):
    import numpy as np

    eager, compiled = got
    if isinstance(compiled, BaseException):
        first = " ".join(str(compiled).split())[:300]
        return False, f"inductor backward of conv2d(pad(x, mode='replicate')) raised {type(compiled).__name__}: {first}"
    err = float(np.max(np.abs(np.asarray(compiled) - np.asarray(eager))))
    scale = float(np.max(np.abs(eager)))
    # float32, a 3x3x2 convolution's transpose plus the padding's sums: 64 round-offs of the scale.
    return err <= 64 * 2.0**-24 * scale, f"inductor vs eager input gradient: max difference {err:.3g} (scale {scale:.3g})"


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
