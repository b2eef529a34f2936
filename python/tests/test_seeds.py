"""The seeds of the random tests (conftest.py): FD_TEST_SEED reruns a test
with the numbers of the run it failed in, alone or among others; a fresh run
draws fresh numbers; a failure's report names the seed and the rerun; a bad
FD_TEST_SEED is a usage error."""
import os
import pathlib
import re
import shutil
import subprocess
import sys

import pytest

CONFTEST = pathlib.Path(__file__).with_name("conftest.py")

PROBE = '''
import numpy as np

def test_first():
    print("first", np.random.default_rng().integers(2**62))

def test_draws():
    a = np.random.default_rng().integers(2**62)
    b = np.random.default_rng().integers(2**62, size=2)
    print("draws", a, *b)

def test_fails():
    assert np.random.default_rng().random() > 2
'''


def run_probe(tmp_path, seed, selection=None):
    """Runs PROBE under the suite's conftest; its output and return code."""
    directory = tmp_path / "probe"
    directory.mkdir(exist_ok=True)
    shutil.copy(CONFTEST, directory / "conftest.py")
    (directory / "test_probe.py").write_text(PROBE)
    env = dict(os.environ)
    env.pop("FD_TEST_SEED", None)
    if seed is not None:
        env["FD_TEST_SEED"] = seed
    target = "test_probe.py" + (f"::{selection}" if selection else "")
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-s", "-p", "no:cacheprovider",
         target], cwd=directory, env=env, capture_output=True, text=True,
        timeout=120)
    return result.stdout + result.stderr, result.returncode


def line(output, word):
    """What the probe's test printed after `word` (pytest's progress dots
    may precede it on its line)."""
    return re.search(word + r"((?: \d+)+)", output).group(1)


def test_a_seed_repeats_a_test_alone_or_among_others(tmp_path):
    output, _ = run_probe(tmp_path, "12345")
    alone, code = run_probe(tmp_path, "12345", "test_draws")
    assert code == 0
    assert line(alone, "draws") == line(output, "draws")
    assert "FD_TEST_SEED=12345" in output
    other, _ = run_probe(tmp_path, "12346", "test_draws")
    assert line(other, "draws") != line(output, "draws")


def test_tests_and_runs_draw_apart(tmp_path):
    output, _ = run_probe(tmp_path, None)
    again, _ = run_probe(tmp_path, None)
    draws = line(output, "draws").split()
    assert len(set(draws)) == 3
    assert line(output, "first").split()[0] not in draws
    assert line(again, "draws") != line(output, "draws")


def test_a_failure_names_its_seed_and_rerun(tmp_path):
    output, code = run_probe(tmp_path, "777", "test_fails")
    assert code == 1
    assert "FD_TEST_SEED=777 python3 -m pytest 'test_probe.py::test_fails'" \
        in output


@pytest.mark.parametrize("seed", ["x", "-3", "1.5"])
def test_a_bad_seed_is_a_usage_error(tmp_path, seed):
    output, code = run_probe(tmp_path, seed)
    assert code == 4
    assert f"FD_TEST_SEED={seed!r} is not a non-negative integer" in output
