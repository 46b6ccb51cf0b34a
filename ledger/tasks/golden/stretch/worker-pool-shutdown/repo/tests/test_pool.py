import pytest

from pool import Pool


def test_results():
    p = Pool(2)
    futs = [p.submit(pow, 2, n) for n in range(5)]
    assert [f.result(timeout=2) for f in futs] == [1, 2, 4, 8, 16]
    p.shutdown()


def test_exception_propagates():
    p = Pool(1)
    f = p.submit(int, "x")
    with pytest.raises(ValueError):
        f.result(timeout=2)
    p.shutdown()


def test_bad_size():
    with pytest.raises(ValueError):
        Pool(0)
