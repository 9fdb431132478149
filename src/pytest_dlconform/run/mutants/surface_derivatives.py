"""Mutants of derivatives of public-surface functions (claims modules.surface-derivatives.*; suite
suites/modules/test_surface_derivatives.py).

Each patches one function's registered gradient the way a reported bug made it behave; the suite's
finite-difference oracles (first order against f, second order against the gradient) must notice.
"""

from __future__ import annotations

from typing import Any

from . import mutant
from ._patch import wrap


@mutant("tf-xlogy-drops-mixed-second-derivative", areas="modules", claims="modules.surface-derivatives.tensorflow",
        target="tensorflow", select="tf or tensorflow",
        cite="https://github.com/tensorflow/tensorflow/issues/127240",
        bug="tf.math.xlogy's gradient with respect to x is log(y) computed outside the tape (as if stop_gradient), so "
            "nested tapes lose the mixed second-derivative term d2/dxdy = 1/y: the first derivative is right, the "
            "Hessian-vector product is not (the class of issue 127240, 'tf.math.xlogy loses second-derivative terms').")
def _tf_xlogy_drops_mixed_term() -> None:
    import tensorflow as tf

    def make(orig: Any) -> Any:
        def xlogy(x: Any, y: Any, name: Any = None) -> Any:
            @tf.custom_gradient
            def f(a: Any, b: Any) -> Any:
                def grad(dy: Any) -> Any:
                    return dy * tf.stop_gradient(tf.math.log(b)), dy * a / b
                return orig(a, b), grad
            return f(tf.convert_to_tensor(x), tf.convert_to_tensor(y))
        return xlogy
    wrap(tf.math, "xlogy", make)
