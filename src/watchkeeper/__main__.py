"""``python -m watchkeeper``."""

import sys

from watchkeeper.cli import main

sys.exit(main())
