import sys

from .node import main

sys.exit(main())
