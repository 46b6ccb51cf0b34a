"""Settings: defaults, overridden by APP_* environment variables."""

DEFAULTS = {"host": "127.0.0.1", "port": 8080, "debug": False, "ratio": 0.5}


def load_settings(defaults=None, env=None):
    """The settings: a copy of ``defaults`` (DEFAULTS when None)."""
    return dict(DEFAULTS if defaults is None else defaults)
