"""Backlog domain rules: plain functions over plain values, no I/O (seed 000 "The work backlog")."""
