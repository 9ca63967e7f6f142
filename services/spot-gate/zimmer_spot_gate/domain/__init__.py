"""Spot-gate domain rules: plain functions over plain values, no I/O (seed 004)."""
