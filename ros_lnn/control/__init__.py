"""Control laws on numpy: tensor-invariant DAC."""
