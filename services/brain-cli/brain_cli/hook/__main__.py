"""``python -m brain_cli.hook claude stop``: the hook process without the console script."""

import sys

from brain_cli.hook.run import main

sys.exit(main(sys.argv[1:]))
