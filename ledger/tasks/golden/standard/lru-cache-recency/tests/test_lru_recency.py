from cachekit import LRUCache


def test_get_refreshes():
    c = LRUCache(2)
    c.put("a", 1)
    c.put("b", 2)
    assert c.get("a") == 1
    c.put("c", 3)
    assert "a" in c and "c" in c and "b" not in c


def test_update_refreshes_without_eviction():
    c = LRUCache(2)
    c.put("a", 1)
    c.put("b", 2)
    c.put("a", 10)
    assert len(c) == 2 and c.get("b") == 2
    c.put("c", 3)
    assert "b" in c and "c" in c and "a" not in c


def test_membership_is_not_a_use():
    c = LRUCache(2)
    c.put("a", 1)
    c.put("b", 2)
    assert "a" in c
    c.put("c", 3)
    assert "a" not in c


def test_missing_get_changes_nothing():
    c = LRUCache(1)
    c.put("a", 1)
    assert c.get("x") is None
    assert c.get("a") == 1
