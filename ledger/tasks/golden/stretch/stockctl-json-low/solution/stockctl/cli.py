"""stockctl: look at the stock list."""

import argparse
import json
import sys

from stockctl import report, store


def build_parser():
    parser = argparse.ArgumentParser(prog="stockctl")
    parser.add_argument("--stock", default="stock.csv", help="the stock CSV file")
    sub = parser.add_subparsers(dest="command", required=True)
    rep = sub.add_parser("report", help="value of every item")
    rep.add_argument("--format", choices=["text", "json"], default="text")
    low = sub.add_parser("low", help="items running low")
    low.add_argument("--threshold", type=int, default=5)
    low.add_argument("--format", choices=["text", "json"], default="text")
    return parser


def main(argv=None):
    args = build_parser().parse_args(argv)
    try:
        items = store.load(args.stock)
    except FileNotFoundError:
        print(f"error: no such file: {args.stock}", file=sys.stderr)
        return 2
    if args.command == "report":
        if args.format == "json":
            print(json.dumps(report.report_rows(items)))
        else:
            print(report.text_report(items))
        return 0
    low = report.low_stock(items, args.threshold)
    if args.format == "json":
        print(json.dumps([{"sku": i.sku, "name": i.name, "qty": i.qty} for i in low]))
    elif low:
        for i in low:
            print(f"{i.sku} {i.name} {i.qty}")
    else:
        print("no low stock")
    return 3 if low else 0
