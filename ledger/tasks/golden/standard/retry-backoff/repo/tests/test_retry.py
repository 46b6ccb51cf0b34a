from retrying import retry


def test_first_try_no_sleep():
    slept = []
    assert retry(lambda: 5, sleep=slept.append) == 5
    assert slept == []


def test_succeeds_on_second_try():
    calls, slept = [], []

    def flaky():
        calls.append(1)
        if len(calls) < 2:
            raise OSError("try again")
        return "ok"

    assert retry(flaky, sleep=slept.append) == "ok"
    assert len(calls) == 2 and slept == [0.1]
