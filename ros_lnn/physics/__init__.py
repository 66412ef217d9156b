"""Reference physics on numpy/scipy only (no torch): Lagrangian machinery, analytic systems,
simulators (offline, and the fixed-step integrator and excitations of the sim node), data sets."""
