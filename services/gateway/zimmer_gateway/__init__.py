"""The gateway: the only HTTP surface (REST, MCP, HTML views, /metrics). Owns no domain data."""
