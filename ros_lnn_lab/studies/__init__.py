"""Studies of the source papers (docs/papers.md): partial-Lagrangian examples and cost, LNN vs LNN-nh,
the TLNN study."""
