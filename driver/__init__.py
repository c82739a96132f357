"""nnfuzz's reference NN HAL 1.3 driver (with 1.0-1.2 feature levels) on numpy."""
