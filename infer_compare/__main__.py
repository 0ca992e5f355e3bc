"""``python -m infer_compare``: the same as the ``infer-compare`` command."""

import sys

from infer_compare.cli import main

sys.exit(main())
