"""The `zimmer` command: run one service, or the whole system on embedded servers."""
