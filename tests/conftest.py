import os
import sys

sys.path.insert(0, os.path.dirname(__file__))

# an unreachable test scheduler is given up after 1 s instead of the default 5 s
os.environ.setdefault("SKETCHSIM_CONNECT_TIMEOUT", "1")
# rich tables wrap at the terminal width; the tests read whole cells, so give them
# the same wide console whether pytest runs in a terminal, in CI or in xdist workers
os.environ["COLUMNS"] = "200"
