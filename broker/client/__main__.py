"""`python -m broker.client ...` is `broker client ...`."""

import sys

from broker.client.cli import main

if __name__ == "__main__":
    sys.exit(main())
