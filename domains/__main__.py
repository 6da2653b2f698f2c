"""`python -m domains ...`: see domains/cli.py."""
import sys

from domains.cli import main

sys.exit(main())
