"""What the alerts service does, each a class built once by `bootstrap` with its collaborators as
constructor arguments: the notifier and its sinks (the paging path), the health report (its
JetStream reader and metrics) and the monitor that pages on it, queue recovery mode and
queued-message maintenance."""
