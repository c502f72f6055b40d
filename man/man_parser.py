"""Build-time entry for argparse-manpage: the `tubeless` parser of this source tree.

`[build_manpages]` in `setup.cfg` loads this file while the package is being built, when
`tubeless` is not installed yet, so it puts the source tree first on `sys.path`.
"""

import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

from tubeless.cli._man import man_parser

__all__ = ["man_parser"]
