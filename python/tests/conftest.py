"""Shared by the device tests: whether a CUDA driver (libcuda, or the emulator
named by $FD_CUDA_DRIVER, as ctest sets for them) can be opened."""
import os

import pytest


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
