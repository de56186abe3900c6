"""memotest adapter for pytest: ``memotest build --pytest [PATH ...]`` makes one target per
test file from pytest's own collection (see :mod:`memotest_pytest.plugin`)."""
