"""Sessions, the quota pool and the spot gate (spot-gate service)."""
