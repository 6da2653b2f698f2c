"""`python -m sandbox run|serve|probe` (see sandbox/cli.py)."""
import sys

from .cli import main

sys.exit(main())
