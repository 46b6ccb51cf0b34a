"""stockctl: look at the stock list."""

import argparse

from stockctl import report, store


def build_parser():
    parser = argparse.ArgumentParser(prog="stockctl")
    parser.add_argument("--stock", default="stock.csv", help="the stock CSV file")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("report", help="value of every item")
    return parser


def main(argv=None):
    args = build_parser().parse_args(argv)
    items = store.load(args.stock)
    if args.command == "report":
        print(report.text_report(items))
    return 0
