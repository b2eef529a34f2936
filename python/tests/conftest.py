"""Shared by the tests: the seed of their random numbers, and whether a CUDA
driver (libcuda, or the emulator named by $FD_CUDA_DRIVER, as ctest sets for
the device tests) can be opened.

Seeds: a run has one seed, $FD_TEST_SEED or a fresh one (the header shows
it). Each test draws from a stream of its own, SeedSequence([run seed, crc32
of the test's id]): every np.random.default_rng() it makes without a seed
is the next child of that stream. A failing test's report gives the seed and
the command that reruns it alone with the numbers it failed on."""
import os
import zlib

import numpy as np
import pytest


def _run_seed():
    value = os.environ.get("FD_TEST_SEED")
    if value is None or value == "":
        return int(np.random.SeedSequence().entropy % 2**63)
    try:
        seed = int(value)
    except ValueError:
        seed = -1
    if seed < 0:
        raise pytest.UsageError(
            f"FD_TEST_SEED={value!r} is not a non-negative integer")
    return seed


RUN_SEED = _run_seed()
_unseeded_default_rng = np.random.default_rng


def pytest_report_header(config):
    return f"FD_TEST_SEED={RUN_SEED}"


@pytest.fixture(autouse=True)
def _seeded_random_numbers(request, monkeypatch):
    stream = np.random.SeedSequence(
        [RUN_SEED, zlib.crc32(request.node.nodeid.encode())])

    def default_rng(seed=None):
        return _unseeded_default_rng(stream.spawn(1)[0] if seed is None
                                     else seed)

    monkeypatch.setattr(np.random, "default_rng", default_rng)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if report.failed:
        report.sections.append((
            "seed", f"FD_TEST_SEED={RUN_SEED}: rerun with\n  FD_TEST_SEED="
            f"{RUN_SEED} python3 -m pytest '{item.nodeid}'"))


@pytest.fixture(scope="session")
def cuda_driver():
    """Skips without a driver; with $FD_CUDA_DRIVER set a failure to open it
    is an error, not a skip."""
    import flashdecode
    try:
        return flashdecode._flashdecode.cuda_device_name()
    except flashdecode.CudaError as error:
        if os.environ.get("FD_CUDA_DRIVER"):
            raise
        pytest.skip(str(error))
