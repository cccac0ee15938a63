"""`python -m payload_estimation.cli ...` runs the command line."""

import sys

from .command_line import main

sys.exit(main())
