"""Zimmer benchmark suite; run with `python -m bench.run` (see bench/README.md)."""
