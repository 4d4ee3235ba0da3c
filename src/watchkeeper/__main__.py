"""``python -m watchkeeper``."""

import sys

from watchkeeper.entry import main

sys.exit(main())
