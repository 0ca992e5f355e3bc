"""python -m infer_compare.cli"""

import sys

from . import main

sys.exit(main())
