"""zimmer_sim: a simulated fleet built only on zimmer_runtime."""
