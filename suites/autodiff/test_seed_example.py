"""autodiff.gradient.seed-example: d(x**3)/dx = 3x**2, 12.0 at x = 2 (seed 000)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_dlconform.api import assert_close, assert_equal, tolerance


def _cube_grad(dl_framework, x: float, dtype: str) -> float:
    """The seed's program: a Variable x, y = x**3 recorded, dy/dx requested."""
    if dl_framework.name == "tensorflow":
        tf = dl_framework.module
        v = tf.Variable(x, dtype=dl_framework.dtype(dtype))
        with tf.GradientTape() as tape:
            y = v**3
        return float(tape.gradient(y, v).numpy())
    torch = dl_framework.module
    v = torch.tensor(x, dtype=dl_framework.dtype(dtype), requires_grad=True)
    (v**3).backward()
    return float(v.grad)


@pytest.mark.claim("autodiff.gradient.seed-example")
def test_seed_example_gives_exactly_twelve(dl_framework):
    # 3 * 2**2 = 12 is exactly representable and every intermediate is exact in float32.
    assert_equal(np.float32(_cube_grad(dl_framework, 2.0, "float32")), np.float32(12.0), what="dy/dx of x**3 at x=2")


@pytest.mark.claim("autodiff.gradient.seed-example")
@given(data=st.data(), dtype=st.sampled_from(["float32", "float64"]))
def test_cube_gradient_is_three_x_squared(dl_framework, data, dtype):
    # |x| from the square root of the dtype's smallest normal number up, so that 3x**2 is
    # a normal number: below it the product underflows (and CPUs may flush subnormals),
    # which is rounding, not differentiation.
    smallest = float(np.sqrt(np.finfo(dtype).tiny)) * 2
    magnitude = data.draw(st.one_of(st.just(0.0), st.just(2.0), st.floats(smallest, 1e3)), label="|x|")
    x = float(np.dtype(dtype).type(magnitude * data.draw(st.sampled_from([1.0, -1.0]), label="sign")))
    # pow's gradient is computed as 3 * x**2 (two roundings) from the rounded x.
    assert_close(_cube_grad(dl_framework, x, dtype), 3.0 * x * x, tolerance(dtype, ops=2),
                 what=f"d(x**3)/dx at x={x!r} ({dtype})", name=f"d(x**3)/dx vs 3x**2 ({dtype})")
