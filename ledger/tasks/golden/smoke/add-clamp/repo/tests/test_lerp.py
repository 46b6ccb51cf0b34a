from mathx import lerp


def test_lerp_endpoints():
    assert lerp(2, 10, 0) == 2
    assert lerp(2, 10, 1) == 10


def test_lerp_middle():
    assert lerp(0, 8, 0.25) == 2
