import pytest

from cachekit import LRUCache


def test_put_get():
    c = LRUCache(2)
    c.put("a", 1)
    assert c.get("a") == 1
    assert c.get("zz", "none") == "none"


def test_capacity_is_bounded():
    c = LRUCache(2)
    for i in range(5):
        c.put(i, i)
    assert len(c) == 2
    assert 4 in c and 3 in c


def test_bad_capacity():
    with pytest.raises(ValueError):
        LRUCache(0)
