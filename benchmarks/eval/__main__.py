"""`python -m benchmarks.eval` runs the evaluation."""

import sys

from benchmarks.eval.run import main

sys.exit(main())
