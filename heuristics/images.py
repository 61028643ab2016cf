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


def tie_positions(problem: Problem, image: str | None) -> np.ndarray:
    """Per node, its tie-break position for a job running ``image``: natural position,
    plus ``num_nodes`` on nodes that do not hold the image (read-only; once per image)."""
    mask = problem.image_mask(image)
    if mask is None:
        return problem.natural_pos
    key = ("image-tie-positions", image)
    found: np.ndarray | None = problem.memo.get(key)
    if found is None:
        found = problem.natural_pos.astype(np.int64) + problem.num_nodes * (~mask)
        found.flags.writeable = False
        problem.memo[key] = found
    return found


def tie_list(problem: Problem, image: str | None) -> list[int]:
    """:func:`tie_positions` as a list (for per-node lookups in Python loops)."""
    if problem.image_mask(image) is None:
        return problem.natural_pos_list
    key = ("image-tie-list", image)
    found: list[int] | None = problem.memo.get(key)
    if found is None:
        found = problem.memo[key] = tie_positions(problem, image).tolist()
    return found


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
