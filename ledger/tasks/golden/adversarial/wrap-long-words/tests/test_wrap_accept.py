from wraptext import wrap


def test_long_word_split():
    assert wrap("a supercalifragilistic b", 6) == ["a", "superc", "alifra", "gilist", "ic b"]


def test_long_word_exact_multiple():
    assert wrap("abcdef gh", 3) == ["abc", "def", "gh"]


def test_paragraphs():
    text = "one two\n\n\n  \nthree four five\n"
    assert wrap(text, 9) == ["one two", "", "three", "four five"]


def test_outer_blank_lines_dropped():
    assert wrap("\n\n  hi there \n\n", 20) == ["hi there"]
