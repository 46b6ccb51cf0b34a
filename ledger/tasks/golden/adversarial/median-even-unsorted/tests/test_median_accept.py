from stats import median


def test_unsorted_odd():
    assert median([9, 1, 5]) == 5


def test_even_count():
    assert median([4, 1, 3, 2]) == 2.5
    assert median([10, 20]) == 15


def test_single():
    assert median([7]) == 7


def test_input_untouched():
    data = [3, 1, 2]
    median(data)
    assert data == [3, 1, 2]
