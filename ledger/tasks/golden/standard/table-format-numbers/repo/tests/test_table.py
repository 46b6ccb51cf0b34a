from tablefmt import format_table


def test_text_table():
    out = format_table(["name", "city"], [["Ada", "London"], ["Grace", "NYC"]])
    assert out == "name  | city\n------+-------\nAda   | London\nGrace | NYC"


def test_header_only():
    assert format_table(["a", "bb"], []) == "a | bb\n--+---"
