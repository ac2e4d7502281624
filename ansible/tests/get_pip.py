"""Stand-in for the get-pip.py that ansible-test downloads from
ci-files.testing.ansible.com to put pip into each sanity test's empty
virtualenv (that host is out of reach here; PyPI is not). Same job, same
arguments: runs pip from the pip wheel beside this file (downloaded from
PyPI by ansible/tests/run) to install the packages named on the command
line. --no-setuptools and --no-wheel are get-pip.py's own options."""
import glob
import os
import sys

here = os.path.dirname(os.path.abspath(__file__))
wheels = sorted(glob.glob(os.path.join(here, "pip-*.whl")))
if not wheels:
    sys.exit("get_pip stand-in: no pip wheel in %s" % here)
sys.path.insert(0, wheels[-1])
from pip._internal.cli.main import main  # noqa: E402  pylint: disable=wrong-import-position

args = [a for a in sys.argv[1:] if a not in ("--no-setuptools", "--no-wheel")]
sys.exit(main(["install", "--no-cache-dir"] + args))
