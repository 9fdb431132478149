"""Input-shape hints: the first input's shape is drawn to suit the op a program starts with.

``_draw_shape`` is also the generator's plain random shape (:mod:`..generate`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from hypothesis import strategies as st

from ..core import Draw, OpSpec, Shape


def _with_hints(specs: list[OpSpec]) -> list[OpSpec]:
    """Attach the input-shape hints that make each op applicable to the first input."""
    hints: dict[str, Callable[[Draw, int], Shape]] = {
        "linalg": _hint_matrix, "conv2d": _hint_image, "avg_pool2d": _hint_image, "matmul": _hint_matrix,
        "permute": _hint_matrix, "reduction": _hint_tensor, "shape": _hint_tensor, "contraction": _hint_tensor,
        "layer_norm": _hint_tensor,
    }
    hints.update(dict.fromkeys(("det_dd", "logdet_dd", "inv_dd", "solve_dd"), _hint_square))
    return [replace(s, hint=hints.get(s.name, hints.get(s.category))) for s in specs]


def _hint_tensor(draw: Draw, max_side: int) -> Shape:
    return _draw_shape(draw, max_side, min_rank=1)


def _hint_square(draw: Draw, max_side: int) -> Shape:
    n = draw(st.integers(1, max_side))
    batch = draw(st.lists(st.integers(1, 3), max_size=2))
    return (*batch, n, n)


def _hint_matrix(draw: Draw, max_side: int) -> Shape:
    batch = draw(st.lists(st.integers(1, 3), max_size=2))
    return (*batch, draw(st.integers(1, max_side)), draw(st.integers(1, max_side)))


def _hint_image(draw: Draw, max_side: int) -> Shape:
    side = st.integers(min(3, max_side), max_side)
    return (draw(st.integers(1, 2)), draw(st.integers(1, 3)), draw(side), draw(side))


def _draw_shape(draw: Draw, max_side: int, min_rank: int = 0) -> Shape:
    rank = draw(st.integers(min_rank, 4))
    shape = draw(st.lists(st.integers(1, max_side), min_size=rank, max_size=rank))
    if rank >= 2 and draw(st.booleans()):
        shape[-1] = shape[-2]  # square matrices are common enough for the matrix ops
    return tuple(shape)
