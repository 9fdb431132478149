"""torch.compile (inductor) gets avg_pool2d's gradient wrong where ceil_mode lets a window overhang.

Claim (dlconform execution.compile.backward): gradients of a torch.compile'd function equal
eager gradients, for the documented ops and modes.
Documentation: https://pytorch.org/docs/stable/generated/torch.nn.AvgPool2d.html (ceil_mode:
"when True, will use ceil instead of floor to compute the output shape"; windows that start
in the input and overhang its end are allowed, and the eager kernel divides them by the part
of the window inside the padded input); https://pytorch.org/docs/stable/generated/torch.compile.html.
Observed on torch 2.13.0+cpu: for f(x) = avg_pool2d(x, 2, stride=2, padding=0,
ceil_mode=True, count_include_pad=True) and x of shape (1, 1, 3, 3), the compiled forward
equals eager (the last window of each row and column is divided by 2, the corner by 1), but
the compiled gradient of sum(f(x)) is 1/4 for every element, where eager and aot_eager give
1/2 on the last row and column and 1 in the corner: the backward divides every window by the
whole kernel.
Upstream: pytorch#198119 (open; "avg_pool1d/2d backward with ceil_mode=True divides the
overhanging last window by the full kernel size").
Found by: suites/execution/test_compiled_backward.py::test_torch_inductor_backward_matches_eager
[cpu-avg_pool2d_pad] once every parameter class reached inductor in every ci run (the class
stride=2, padding=0, ceil_mode=True, count_include_pad=True).

Run: python torch_inductor_avg_pool_ceil_backward.py
Exit 1 while the bug is there, 0 once fixed, 2 if torch cannot be imported.
"""

import sys


def observed():
    """(eager input gradient, compiled input gradient) of sum(avg_pool2d(x)), as lists."""
    import torch
    import torch.nn.functional as F

    def f(x):
        return F.avg_pool2d(x, 2, stride=2, padding=0, ceil_mode=True, count_include_pad=True).sum()

    x = torch.arange(9.0).reshape(1, 1, 3, 3).requires_grad_()
    (eager,) = torch.autograd.grad(f(x), x)
    (compiled,) = torch.autograd.grad(torch.compile(f, backend="inductor")(x), x)
    return eager[0, 0].tolist(), compiled[0, 0].tolist()


def expected():
    # Windows: rows {0,1} and {2}, columns likewise; each element's gradient is 1 / (the size
    # of its window inside the input): 1/4, 1/2 on the last row and column, 1 in the corner.
    return [[0.25, 0.25, 0.5], [0.25, 0.25, 0.5], [0.5, 0.5, 1.0]]


def judge(got, want):
    import numpy as np

    eager, compiled = (np.asarray(g) for g in got)
    err = float(np.max(np.abs(compiled - np.asarray(want))))
    if not np.array_equal(eager, np.asarray(want)):
        return False, f"eager gives {eager.tolist()}, the documented windows give {want} (the script's premise)"
    # float32 sums of at most 4 exact terms: the gradients are exact.
    return err == 0.0, f"inductor gradient {compiled.tolist()} vs eager {eager.tolist()} (max difference {err:.3g})"


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
