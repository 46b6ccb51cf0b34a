from money.fmt import format_money

__all__ = ["format_money"]
