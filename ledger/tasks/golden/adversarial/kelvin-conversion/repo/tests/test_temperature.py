from units import convert


def test_c_to_f():
    assert convert(100, "C", "F") == 212


def test_f_to_c():
    assert convert(32, "F", "C") == 0


def test_identity():
    assert convert(21.5, "C", "C") == 21.5
