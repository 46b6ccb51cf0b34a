import datetime

import pytest

from dates import parse_date


def test_iso():
    assert parse_date(" 2024-03-05 ") == datetime.date(2024, 3, 5)


def test_garbage():
    with pytest.raises(ValueError):
        parse_date("soon")
