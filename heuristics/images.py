"""Image locality in the greedy's tie-breaks (an npu-place addition).

Wherever a strategy breaks a tie between equally scored nodes by natural node-name order
(upstream iterates Go maps there), a node that already holds the job's image
(``nodes[].images``) goes first, then natural order.  Upstream's scores and orders are
untouched: the preference only decides between nodes upstream's order finds equal.  With
config ``image-locality: false``, or a job without an image, or no node holding it, the
positions are the natural ones and every answer is upstream's.
"""

from __future__ import annotations

import numpy as np

from models.compiled import Problem
from models.derived import Derived

#: :func:`tie_positions` per image (read-only arrays) and :func:`tie_list` per image.
TIE_POSITIONS: Derived[str | None, np.ndarray] = Derived("image tie positions")
TIE_LIST: Derived[str | None, list[int]] = Derived("image tie list")


def tie_positions(problem: Problem, image: str | None) -> np.ndarray:
    """Per node, its tie-break position for a job running ``image``: natural position,
    plus ``num_nodes`` on nodes that do not hold the image (read-only; once per image)."""
    mask = problem.image_mask(image)
    if mask is None:
        return problem.natural_pos
    def compute() -> np.ndarray:
        found = problem.natural_pos.astype(np.int64) + problem.num_nodes * (~mask)
        found.flags.writeable = False
        return found

    return problem.derived.get_or_compute(TIE_POSITIONS, image, compute)


def tie_list(problem: Problem, image: str | None) -> list[int]:
    """:func:`tie_positions` as a list (for per-node lookups in Python loops)."""
    if problem.image_mask(image) is None:
        return problem.natural_pos_list
    return problem.derived.get_or_compute(
        TIE_LIST, image, lambda: tie_positions(problem, image).tolist())


def image_first(problem: Problem, image: str | None, nodes: np.ndarray) -> np.ndarray:
    """``nodes`` (in natural order) with the holders of ``image`` first, each part in its
    order (stable); ``nodes`` itself when the tie-break does not apply."""
    mask = problem.image_mask(image)
    if mask is None or not len(nodes):
        return nodes
    held = mask[nodes]
    if held.all() or not held.any():
        return nodes
    return np.concatenate([nodes[held], nodes[~held]])
