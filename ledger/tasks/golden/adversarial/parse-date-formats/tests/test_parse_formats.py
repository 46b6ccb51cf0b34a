import datetime

import pytest

from dates import parse_date

D = datetime.date(2024, 3, 5)


@pytest.mark.parametrize("text", ["05/03/2024", "5/3/2024", "5 March 2024", "5 mar 2024", "March 5, 2024", "MAR 5 2024", "  2024-03-05\n"])
def test_formats(text):
    assert parse_date(text) == D


def test_other_month():
    assert parse_date("December 31, 1999") == datetime.date(1999, 12, 31)


@pytest.mark.parametrize("bad", ["31/02/2024", "5 Marchh 2024", "2024/03/05", "", "5 3 2024", "Smarch 5, 2024"])
def test_rejects(bad):
    with pytest.raises(ValueError):
        parse_date(bad)
