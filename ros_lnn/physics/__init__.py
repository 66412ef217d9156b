"""Reference physics on numpy/scipy only (no torch): Lagrangian machinery, analytic systems, simulators."""
