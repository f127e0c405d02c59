"""pinfast from its wheel: libpinfast.so and the `pinfast` command.

The wheel installs the CMake project's install tree into this package
(site-packages/pinfast/): lib/libpinfast.so, bin/pinfast (tools/pinfast of the
repository) and share/doc/pinfast/.  The `pinfast` console script runs
bin/pinfast, which finds lib/libpinfast.so next to itself.  See docs/cli.md.
"""

import os
import runpy
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(_HERE, "bin", "pinfast")


def library():
    """The path of the libpinfast.so this package ships (for LD_PRELOAD)."""
    return os.path.join(_HERE, "lib", "libpinfast.so")


def main():
    """The `pinfast` console script and `python -m pinfast`: runs bin/pinfast."""
    sys.argv[0] = SCRIPT  # its usage lines say `pinfast`
    runpy.run_path(SCRIPT, run_name="__main__")  # ends with sys.exit(status)
    return 0
