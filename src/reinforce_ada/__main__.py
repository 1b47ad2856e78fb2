"""`python -m reinforce_ada` = `reinforce-ada`."""

import sys

from reinforce_ada.cli.main import main

sys.exit(main())
