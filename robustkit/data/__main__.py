"""``python -m robustkit.data check [FOLDER]``: validate a teaching-set folder."""
import argparse
import sys

from robustkit.data.check import check_mini
from robustkit.data.mini import MINI_DIR


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m robustkit.data")
    sub = parser.add_subparsers(dest="command", required=True)
    check = sub.add_parser("check", help="validate a teaching-set folder (default data/mini)")
    check.add_argument("folder", nargs="?", default=str(MINI_DIR))
    args = parser.parse_args(argv)
    report = check_mini(args.folder)
    print(report.summary())
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())
