import sys

from grumem.cli import main

sys.exit(main())
