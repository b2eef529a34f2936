"""Runs a command and succeeds only if it exits with the given code.

usage: expect-exit.py CODE COMMAND [ARGS...]; the command's output passes
through, so FileCheck can check it too.
"""
import subprocess
import sys

expected = int(sys.argv[1])
completed = subprocess.run(sys.argv[2:])
if completed.returncode != expected:
    sys.stderr.write(
        f"expect-exit: {sys.argv[2]} exited with {completed.returncode}, "
        f"expected {expected}\n")
    sys.exit(1)
