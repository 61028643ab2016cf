"""The upper bounds on the objective that a CP-SAT solve reports, in one place.

A solve's ``bound`` is the smallest of

* the search's own: CP-SAT's ``best_objective_bound`` of the whole-batch model, and
  ``best_possible`` (every objective term at its best value, stated as a row of the
  model: :func:`solver.cpsat.build_model`);
* the combinatorial bound on each whole-node job's origin hits
  (:mod:`solver.bounds.group_hits`, :func:`~solver.bounds.group_hits.combinatorial_bound`),
  applied to the whole-batch model's answer (:func:`solver.cpsat.run_whole_batch`);
* the origin-hit LP bound (:mod:`solver.bounds.hit_lp`,
  :func:`~solver.bounds.hit_lp.tighten_bound`), computed after the search when budget is
  left (:func:`solver.engine.solve_cpsat`).

None of them adds a row to a model the search solves, so none changes a search's path.
A focused model (a neighbourhood step) and the neighbourhood search report no bound.
"""
