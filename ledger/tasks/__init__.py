"""Golden tasks: the format, the loader, the packaged tiers and their validation."""
