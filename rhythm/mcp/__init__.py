"""`rhythm mcp`: a Model Context Protocol server over the local database (docs/mcp.md).

- ``tools``: the work behind each tool (settings and plain arguments in, a model out);
- ``models``: what the tools return (the output schemas), imported text marked as data;
- ``server``: the MCP server (the official SDK's ``MCPServer``), stdio or streamable HTTP on
  127.0.0.1 only.
"""

from rhythm.mcp.server import build_server, serve

__all__ = ["build_server", "serve"]
