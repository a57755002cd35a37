"""Shared fixtures: the real-sshd test bed and fresh containers in it (see tests/testbed.py)."""

from __future__ import annotations

import itertools
from collections.abc import Iterator

import pytest

from testbed import Testbed

_ct_numbers = itertools.count(200)


@pytest.fixture(scope="session")
def testbed() -> Iterator[Testbed]:
    """A real OpenSSH sshd on 127.0.0.1 serving the stand-in pct and nvidia-smi."""
    tb = Testbed().start()
    try:
        yield tb
    finally:
        tb.stop()


@pytest.fixture
def ct(testbed: Testbed) -> Iterator[int]:
    """A fresh running container number (200, 201, ...); destroyed with its processes afterwards."""
    number = next(_ct_numbers)
    while testbed.ct_conf_path(number).exists():  # taken by a test that picked its own number
        number = next(_ct_numbers)
    testbed.ct_create(number, running=True)
    try:
        yield number
    finally:
        testbed.ct_destroy(number)
