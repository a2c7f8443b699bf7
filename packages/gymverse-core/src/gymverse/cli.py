"""`gymverse` command line (placeholder until the CLI module lands)."""

import sys


def main(argv: list[str] | None = None) -> int:
    """Entry point of the `gymverse` command."""
    from gymverse.registry import list_envs

    for env_id in list_envs():
        print(env_id)
    return 0


if __name__ == "__main__":
    sys.exit(main())
