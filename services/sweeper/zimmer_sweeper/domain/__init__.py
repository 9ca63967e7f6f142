"""The sweeper's pure rules: no I/O."""
