"""The ranked work backlog (backlog service)."""
