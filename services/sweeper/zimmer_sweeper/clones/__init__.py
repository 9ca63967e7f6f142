"""Clones: the ownership guard, the orphan clone sweep and its reclaim, the stale cleanup."""
