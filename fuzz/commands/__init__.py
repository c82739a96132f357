"""One module per ``nnfuzz`` subcommand, each with ``register(subparsers)``."""
