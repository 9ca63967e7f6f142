"""The gateway's MCP surface: tool groups (`registry`), the servers behind `/mcp` (`server`)."""
