"""Tests of the MCP server."""
