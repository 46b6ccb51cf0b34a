import threading

from bank import Account, InsufficientFunds


def _interleaving_pause(wait_s=0.4):
    """The first caller waits (bounded) until a second caller reaches the same point."""
    arrived = threading.Event()
    lock = threading.Lock()
    count = [0]

    def pause():
        with lock:
            count[0] += 1
            first = count[0] == 1
        if first:
            arrived.wait(wait_s)
        else:
            arrived.set()

    return pause


def _run_two(target):
    threads = [threading.Thread(target=target) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(5)
    assert not any(t.is_alive() for t in threads)


def test_concurrent_withdrawals_cannot_overdraw():
    acct = Account(100, pause=_interleaving_pause())
    outcomes = []

    def worker():
        try:
            acct.withdraw(100)
            outcomes.append("ok")
        except InsufficientFunds:
            outcomes.append("refused")

    _run_two(worker)
    assert sorted(outcomes) == ["ok", "refused"]
    assert acct.balance == 0


def test_concurrent_deposits_are_not_lost():
    acct = Account(0, pause=_interleaving_pause())
    _run_two(lambda: acct.deposit(10))
    assert acct.balance == 20
