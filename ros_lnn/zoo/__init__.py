"""Model zoo from the seed papers: partial-Lagrangian examples, nonholonomic and TLNN studies."""
