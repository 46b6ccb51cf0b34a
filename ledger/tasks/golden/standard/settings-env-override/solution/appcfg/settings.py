"""Settings: defaults, overridden by APP_* environment variables."""

import os

from appcfg.convert import convert

DEFAULTS = {"host": "127.0.0.1", "port": 8080, "debug": False, "ratio": 0.5}


def load_settings(defaults=None, env=None):
    """The settings: ``defaults`` (DEFAULTS when None) overridden by APP_* variables."""
    env = os.environ if env is None else env
    settings = dict(DEFAULTS if defaults is None else defaults)
    for key, value in list(settings.items()):
        name = f"APP_{key.upper()}"
        if name in env:
            try:
                settings[key] = convert(env[name], value)
            except ValueError as exc:
                raise ValueError(f"{name}: {exc}") from None
    return settings
