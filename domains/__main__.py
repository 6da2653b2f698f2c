"""`python -m domains ...`: see domains/cli.py."""
import sys

if not __package__:  # run by path: the project's packages import from the repository root, as modules
    sys.exit("error: run it from the repository root as a module: python -m domains ...")

from domains.cli import main  # noqa: E402

sys.exit(main())
