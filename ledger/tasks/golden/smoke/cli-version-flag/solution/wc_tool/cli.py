"""The wc-tool command line."""

import argparse

from wc_tool import __version__


def build_parser():
    parser = argparse.ArgumentParser(prog="wc-tool", description="Count lines, words and characters.")
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    parser.add_argument("path", help="the file to count")
    return parser


def main(argv=None):
    args = build_parser().parse_args(argv)
    with open(args.path, encoding="utf-8") as fh:
        text = fh.read()
    print(f"{len(text.splitlines())} {len(text.split())} {len(text)} {args.path}")
    return 0
