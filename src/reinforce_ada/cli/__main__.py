"""`python -m reinforce_ada.cli` = `reinforce-ada`."""

import sys

from reinforce_ada.cli.main import main

sys.exit(main())
