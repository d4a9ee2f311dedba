import sys

from rhythm.cli import main

sys.exit(main())
