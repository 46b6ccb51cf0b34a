from textkit import slugify


def test_single_word():
    assert slugify("hello") == "hello"


def test_two_words():
    assert slugify("Hello World") == "hello-world"
