"""``python -m gymverse.checker TARGET [--levels 1,5,10] [--seeds 0,1,2]``: print the report as one JSON line.

Meant for a sandbox parent process: stdout carries exactly one JSON document (`CheckReport.to_json`, or
``{"error": ...}`` for a target that cannot be resolved); exit code 0 passed, 1 failed, 2 bad target or usage.
Anything the env prints goes to stderr so it cannot corrupt the JSON.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from collections.abc import Sequence

from gymverse.checker import CheckTargetError, check_env


def main(argv: Sequence[str] | None = None) -> int:
    """Run the checker on one target and print its JSON report."""
    from gymverse.command_line import levels_arg, positive_int_arg, seeds_arg

    parser = argparse.ArgumentParser(prog="python -m gymverse.checker", description=__doc__)
    parser.add_argument("target", help="registered id, 'path/to/env.py[:Class]' or 'pkg.mod:Class'")
    parser.add_argument("--levels", type=levels_arg, default=(1, 5, 10))
    parser.add_argument("--seeds", type=seeds_arg, default=(0, 1, 2))
    parser.add_argument("--max-steps", type=positive_int_arg, default=None)
    args = parser.parse_args(argv)
    stdout = sys.stdout
    try:
        with contextlib.redirect_stdout(sys.stderr):
            report = check_env(args.target, levels=args.levels, seeds=args.seeds, max_steps=args.max_steps)
    except CheckTargetError as err:
        print(json.dumps({"error": str(err), "target": args.target}), file=stdout)
        return 2
    print(report.to_json(), file=stdout)
    return 0 if report.passed else 1


if __name__ == "__main__":
    sys.exit(main())
