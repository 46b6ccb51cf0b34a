import pytest

from retrying import retry


def _failing(exc, log):
    def f():
        log.append(1)
        raise exc
    return f


def test_backoff_and_no_final_sleep():
    calls, slept = [], []
    err = OSError("down")
    with pytest.raises(OSError) as info:
        retry(_failing(err, calls), attempts=4, delay=0.5, backoff=3, sleep=slept.append)
    assert info.value is err
    assert len(calls) == 4
    assert slept == [0.5, 1.5, 4.5]


def test_other_exceptions_propagate_immediately():
    calls, slept = [], []
    with pytest.raises(KeyError):
        retry(_failing(KeyError("k"), calls), exceptions=(OSError,), sleep=slept.append)
    assert len(calls) == 1 and slept == []


def test_single_attempt():
    calls, slept = [], []
    with pytest.raises(ValueError):
        retry(_failing(ValueError("v"), calls), attempts=1, sleep=slept.append)
    assert len(calls) == 1 and slept == []


def test_bad_attempts():
    called = []
    with pytest.raises(ValueError):
        retry(lambda: called.append(1), attempts=0, sleep=lambda s: None)
    assert called == []
