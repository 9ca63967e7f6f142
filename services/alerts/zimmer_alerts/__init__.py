"""The one paging path and the health monitors (alerts service)."""
