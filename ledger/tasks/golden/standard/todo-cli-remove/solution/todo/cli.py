"""The todo command line: a list of items kept in a JSON file."""

import argparse
import json
import sys
from pathlib import Path


def load(path):
    p = Path(path)
    return json.loads(p.read_text(encoding="utf-8")) if p.exists() else []


def save(path, items):
    Path(path).write_text(json.dumps(items, indent=2) + "\n", encoding="utf-8")


def build_parser():
    parser = argparse.ArgumentParser(prog="todo")
    parser.add_argument("--file", default="todo.json", help="where the list is kept")
    sub = parser.add_subparsers(dest="command", required=True)
    add = sub.add_parser("add", help="add an item")
    add.add_argument("text", nargs="+")
    sub.add_parser("list", help="show the items")
    remove = sub.add_parser("remove", help="remove an item by its number")
    remove.add_argument("number", type=int)
    return parser


def main(argv=None):
    args = build_parser().parse_args(argv)
    items = load(args.file)
    if args.command == "add":
        text = " ".join(args.text)
        items.append(text)
        save(args.file, items)
        print(f"added: {text}")
    elif args.command == "list":
        for i, text in enumerate(items, 1):
            print(f"{i}. {text}")
    elif args.command == "remove":
        if not 1 <= args.number <= len(items):
            print(f"error: no item {args.number}", file=sys.stderr)
            return 1
        text = items.pop(args.number - 1)
        save(args.file, items)
        print(f"removed: {text}")
    return 0
