"""python -m infer_compare.cli"""

import sys

from infer_compare.cli import main

sys.exit(main())
