"""nnfuzz's reference NN HAL 1.3 driver (with 1.0-1.2 feature levels) on numpy."""

SINGLE_THREADED_BLAS = {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}
"""Environment for processes that run the kernels side by side (parallel campaign
workers). numpy's BLAS otherwise starts a thread per CPU in every one of them, and
oversubscribed, a tall, narrow matrix product (the LSTM cells' gates, a batch of tiny
convolutions) took 2.5 s instead of 0.07 s. Read once, when numpy is first imported."""
