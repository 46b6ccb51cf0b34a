from appcfg.settings import DEFAULTS, load_settings


def test_defaults():
    assert load_settings(env={}) == DEFAULTS


def test_copy_not_alias():
    mine = {"a": 1}
    out = load_settings(mine, env={})
    out["a"] = 2
    assert mine == {"a": 1}
