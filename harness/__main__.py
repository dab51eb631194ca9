import os
import sys

from harness.app.cli import main

code = main()
if code == 130:
    # Interrupted: the run folder is closed and what was started is stopped, so skip the
    # interpreter's teardown (pandas, pyarrow: up to a second on a busy machine).
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
sys.exit(code)
