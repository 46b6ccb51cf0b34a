from tablefmt.table import format_table

__all__ = ["format_table"]
