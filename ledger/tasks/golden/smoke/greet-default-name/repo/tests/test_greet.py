from greeter import greet


def test_greets_by_name():
    assert greet("Ada") == "Hello, Ada!"


def test_keeps_inner_spaces():
    assert greet("Grace Hopper") == "Hello, Grace Hopper!"
