import sys

from memotest.cli import main

sys.exit(main())
