"""Op families of issue 12, part A: indexing with accumulation, ordering, decompositions.

:func:`_family_a_ops` is what the op table appends (all ``composable=False``: checked one
op at a time, never drawn into composed programs). :data:`FAMILY_A_PARAMS` lists each op's
parameter classes for :mod:`..samples` (plain values; amax/amin take the reduction classes
``samples._DIMS``): every documented parameter at its default (first) and at non-default
values. Where a framework's default differs the class says so:

* ``index_put``: ``accumulate`` False (default; distinct indices, the only documented case)
  and True (repeated indices add);
* ``index_add``: ``alpha`` 1 (default), 0.5, -2 and dims -1 and 0; ``scatter_add``: dims;
* ``embedding``: a 1-D and a 2-D index tensor, TensorFlow through ``tf.nn.embedding_lookup``
  and ``tf.gather``; ``padding_idx``, ``scale_grad_by_freq``, ``sparse`` (whose gradients
  are not the function's derivative, by documentation) are checked against their
  documented conventions in suites/autodiff/test_documented_gradients.py, not here;
* ``sort_sep``: ``descending`` False (default) / True, ``stable`` False (default) / True,
  dim -1 (default) / 0; ``topk_sep``: ``k`` 1 and 2, ``largest`` True (default) / False,
  ``sorted`` True (default) / False, dim -1 (default) / 0;
* ``cumprod``: dim, and TensorFlow's ``exclusive`` and ``reverse`` (default False) each way;
* ``svd``: singular values (``svdvals`` / ``compute_uv=False``) and one singular pair's
  ``u v^T`` with ``full_matrices`` True (torch's default) and False (TensorFlow's default);
* ``qr``: ``mode`` "reduced" (default) / "complete" (``full_matrices``), Q and R;
* ``eigh``: eigenvalues with ``UPLO`` "L" (default) / "U", and the projector on the top and
  the bottom eigenvector. ``frac`` (the perturbation's size, 1/2 or 1/4) varies alongside.
"""

from __future__ import annotations

from typing import Any, Final

from ..core import OpSpec
from .decompositions import _decomposition_ops
from .indexing import _indexing_ops
from .ordering import _ordering_ops


def _family_a_ops() -> list[OpSpec]:
    return _indexing_ops() + _ordering_ops() + _decomposition_ops()


#: op -> parameter classes (fixed values laid over the op's plan), default class first.
FAMILY_A_PARAMS: Final[dict[str, list[dict[str, Any]]]] = {
    "scatter_add": [{"dim": -1}, {"dim": 0}],
    "index_add": [{"dim": -1, "alpha": 1.0}, {"dim": 0, "alpha": 0.5}, {"dim": -1, "alpha": -2.0}],
    "index_put": [{"accumulate": False}, {"accumulate": True}],
    "embedding": [{"ids_shape": (5,), "tf_api": "embedding_lookup"}, {"ids_shape": (2, 3), "tf_api": "gather"}],
    "sort_sep": [{"axis": -1, "descending": False, "stable": False}, {"axis": 0, "descending": True, "stable": True},
                 {"axis": -1, "descending": True, "stable": False}],
    "topk_sep": [{"axis": -1, "k": 1, "largest": True, "sorted": True},
                 {"axis": 0, "k": 2, "largest": False, "sorted": True},
                 {"axis": -1, "k": 2, "largest": True, "sorted": False}],
    "cumprod": [{"axis": -1, "exclusive": False, "reverse": False}, {"axis": 0, "exclusive": True, "reverse": False},
                {"axis": -1, "exclusive": False, "reverse": True}, {"axis": 0, "exclusive": True, "reverse": True}],
    "svd": [{"out": "s", "frac": 0.5}, {"out": "uv", "full_matrices": True, "pair": "top", "frac": 0.25},
            {"out": "uv", "full_matrices": False, "pair": "bottom", "frac": 0.5}],
    "qr": [{"mode": "reduced", "out": "q", "frac": 0.5}, {"mode": "reduced", "out": "r", "frac": 0.25},
           {"mode": "complete", "out": "q", "frac": 0.25}, {"mode": "complete", "out": "r", "frac": 0.5}],
    "eigh": [{"out": "values", "uplo": "L", "frac": 0.5}, {"out": "values", "uplo": "U", "frac": 0.25},
             {"out": "proj", "pair": "top", "uplo": "L", "frac": 0.25},
             {"out": "proj", "pair": "bottom", "uplo": "U", "frac": 0.5}],
}
