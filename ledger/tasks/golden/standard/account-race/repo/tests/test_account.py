import pytest

from bank import Account, InsufficientFunds


def test_deposit_and_withdraw():
    a = Account(10)
    assert a.deposit(5) == 15
    assert a.withdraw(15) == 0


def test_overdraw_refused():
    a = Account(10)
    with pytest.raises(InsufficientFunds):
        a.withdraw(11)
    assert a.balance == 10


def test_positive_amounts_only():
    with pytest.raises(ValueError):
        Account().deposit(0)
    with pytest.raises(ValueError):
        Account(5).withdraw(-1)


def test_pause_hook_is_called():
    calls = []
    a = Account(10, pause=lambda: calls.append(1))
    a.deposit(1)
    a.withdraw(1)
    assert len(calls) == 2
