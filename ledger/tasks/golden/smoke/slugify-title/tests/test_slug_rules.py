from textkit import slugify


def test_punctuation_and_padding():
    assert slugify("  Hello, World!  ") == "hello-world"


def test_runs_collapse():
    assert slugify("a--b__c   d") == "a-b-c-d"


def test_accents_fold():
    assert slugify("Crème brûlée à la carte") == "creme-brulee-a-la-carte"


def test_digits_kept():
    assert slugify("Top 10 Tips (2024)") == "top-10-tips-2024"


def test_empty():
    assert slugify("") == ""
    assert slugify("?!") == ""
