"""A bank account, safe to use from several threads."""

import threading


class InsufficientFunds(Exception):
    """A withdrawal larger than the balance."""


class Account:
    def __init__(self, balance=0, *, pause=None):
        self.balance = balance
        # Test hook, called between reading the balance and writing the new one.
        self._pause = pause or (lambda: None)
        self._lock = threading.Lock()

    def deposit(self, amount):
        if amount <= 0:
            raise ValueError("amount must be positive")
        with self._lock:
            new = self.balance + amount
            self._pause()
            self.balance = new
            return new

    def withdraw(self, amount):
        if amount <= 0:
            raise ValueError("amount must be positive")
        with self._lock:
            if amount > self.balance:
                raise InsufficientFunds(f"balance {self.balance} is less than {amount}")
            self._pause()
            self.balance -= amount
            return self.balance
