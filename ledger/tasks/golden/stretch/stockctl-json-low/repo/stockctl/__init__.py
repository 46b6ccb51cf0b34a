"""Stock list tools."""
